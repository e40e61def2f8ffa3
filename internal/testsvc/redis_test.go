package testsvc

import (
	"testing"
	"time"
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
	deadline := time.Now().Add(5 * time.Second)
	for !r.ping() {
		if time.Now().After(deadline) {
			t.Fatal("thawed redis did not answer within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
