package clusterlimit

import (
	"fmt"
	"net"
	"os"
)

// DefaultNodeID names a node without cluster.node_id: its host name and
// its admin listener's port, "host:port" (the port tells apart nodes on
// one host).
func DefaultNodeID(admin net.Addr) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "levee"
	}
	port := "0"
	if a, ok := admin.(*net.TCPAddr); ok {
		port = fmt.Sprint(a.Port)
	}
	return net.JoinHostPort(host, port)
}
