package testenv

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// TCPListenAddrs returns the local IP addresses of every TCP socket in LISTEN
// state on port in this network namespace (from /proc/net/tcp and tcp6),
// e.g. ["127.0.0.1"] or ["0.0.0.0", "::"].
func TCPListenAddrs(port int) ([]string, error) {
	var out []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for i, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if i == 0 || len(f) < 4 || f[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			hexIP, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil || int(p) != port {
				continue
			}
			ip, err := procNetIP(hexIP)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %v", file, line, err)
			}
			out = append(out, ip.String())
		}
	}
	return out, nil
}

// procNetIP decodes an address of /proc/net/tcp{,6}: 32-bit words in host
// (little-endian) order.
func procNetIP(s string) (net.IP, error) {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, fmt.Errorf("bad address %q", s)
	}
	ip := make(net.IP, len(b))
	for w := 0; w < len(b); w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	return ip, nil
}
