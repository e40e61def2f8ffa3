package testsvc

import (
	"testing"
)

func TestEtcdStartsAndStops(t *testing.T) {
	e := StartEtcd(t)
	if !e.healthy() {
		t.Fatal("etcd not healthy after start")
	}
	e.Stop()
	if e.healthy() {
		t.Fatal("etcd still answering after Stop")
	}
	e.Restart(t)
	if !e.healthy() {
		t.Fatal("etcd not healthy after Restart")
	}
}
