package config

import "testing"

const (
	listenersAdmin = "admin: {listen: \"127.0.0.1:9090\"}\n"
	tlsPair        = "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem}"
	admin          = listenersAdmin
)

// rejectsListeners are TestParseRejects' cases of the listeners block,
// each naming its field path and value.
var rejectsListeners = []rejectCase{
	{"both forms", head + "listeners:\n  - {name: a, listen: \":8081\"}\n" + upstreams + routes, []string{
		"listen: not with listeners (write the one-listener form, listen and tls, or listeners, not both)",
	}},
	{"both forms with tls", admin + "tls: " + tlsPair + "\nlisteners:\n  - {name: a, listen: \":8081\"}\n" + upstreams + routes, []string{
		"tls: not with listeners (give each listener its own tls)",
	}},
	{"name twice", admin + "listeners:\n  - {name: a, listen: \":8081\"}\n  - {name: a, listen: \":8082\"}\n" + upstreams + routes, []string{
		`listeners[1].name: listener "a" is named twice`,
	}},
	{"same port", admin + "listeners:\n  - {name: a, listen: \":8081\"}\n  - {name: b, listen: \"127.0.0.1:8081\"}\n" + upstreams + routes, []string{
		`listeners[1].listen: must not bind the same port as listener "a" (":8081"), got "127.0.0.1:8081"`,
	}},
	{"admin on a listener's port", "admin: {listen: \"127.0.0.1:8082\"}\nlisteners:\n  - {name: a, listen: \":8081\"}\n  - {name: b, listen: \":8082\"}\n" + upstreams + routes, []string{
		`admin.listen: must not bind the same port as listen (":8082"), got "127.0.0.1:8082"`,
	}},
	{"redirect with tls", admin + "listeners:\n  - {name: a, listen: \":8081\"}\n  - {name: b, listen: \":8082\", redirect_https: {}, tls: " + tlsPair + "}\n" + upstreams + routes, []string{
		"listeners[1].redirect_https: a redirecting listener is clear text: not with tls",
	}},
	{"only redirects", admin + "listeners:\n  - {name: a, listen: \":8081\", redirect_https: {port: 8443}}\n" + upstreams + routes, []string{
		"listeners: at least one listener must serve routes (one without redirect_https)",
	}},
	{"redirect port out of range", admin + "listeners:\n  - {name: a, listen: \":8081\", redirect_https: {port: 70000}}\n  - {name: b, listen: \":8082\"}\n" + upstreams + routes, []string{
		"listeners[0].redirect_https.port: must be a number from 1 to 65535, got 70000",
	}},
	{"listener tls without key", admin + "listeners:\n  - {name: a, listen: \":8081\", tls: {cert_file: testdata/tls/cert.pem}}\n" + upstreams + routes, []string{
		"listeners[0].tls.key_file: required with listeners[0].tls.cert_file",
	}},
	{"empty list", admin + "listeners: []\n" + upstreams + routes, []string{
		"listeners: must list at least one listener (omit it for listen)",
	}},
}

// TestListenerSetOneForm: the one-listener form is one list inside, with
// server's caps and PROXY protocol.
func TestListenerSetOneForm(t *testing.T) {
	cfg, err := Parse([]byte(head + "server: {max_connections: 7, max_connections_per_ip: 3}\n" + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	set := cfg.ListenerSet()
	if len(set) != 1 || set[0].Name != DefaultListenerName || set[0].Listen != ":8080" || set[0].MaxConnections != 7 || set[0].MaxConnectionsPerIP != 3 {
		t.Fatalf("ListenerSet = %+v", set)
	}
	if p := cfg.PrimaryListener(); p.Listen != ":8080" {
		t.Fatalf("PrimaryListener = %+v", p)
	}
}
