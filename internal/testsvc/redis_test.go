package testsvc

import (
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

func TestRedisStartsFreezesAndRestarts(t *testing.T) {
	r := StartRedis(t)
	if !r.ping() {
		t.Fatal("redis not answering after start")
	}
	r.Freeze()
	if r.ping() {
		t.Fatal("frozen redis answered PING")
	}
	r.Thaw()
	testkit.Until(t, 5*time.Second, "thawed redis to answer PING", r.ping)
	r.Freeze()
	r.Kill()
	if r.ping() {
		t.Fatal("killed redis answered PING")
	}
	r.Restart(t)
	if !r.ping() {
		t.Fatal("redis not answering after Restart")
	}
}
