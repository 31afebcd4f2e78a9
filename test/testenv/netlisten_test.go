package testenv

import (
	"net"
	"testing"
)

func TestTCPListenAddrs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	got, err := TCPListenAddrs(port)
	if err != nil || len(got) != 1 || got[0] != "127.0.0.1" {
		t.Fatalf("TCPListenAddrs(%d) = %q, %v; want [127.0.0.1]", port, got, err)
	}
	ln2, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	got, err = TCPListenAddrs(ln2.Addr().(*net.TCPAddr).Port)
	if err != nil || len(got) != 1 || (got[0] != "::" && got[0] != "0.0.0.0") {
		t.Fatalf("TCPListenAddrs of a wildcard listener = %q, %v", got, err)
	}
}
