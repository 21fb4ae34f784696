// Keeping a one-host job's rendezvous store off the network. LibTorch 1.13's c10d::TCPStore
// listens on every interface whatever address it is given (and 2.x's classic backend, which zt
// asks for, does too unless handed a socket). A job whose rendezvous address is loopback has every
// rank on this host, so rank 0 ties the store's listening socket to the loopback device
// (SO_BINDTODEVICE "lo"): a connection from another host is refused, as if it listened on
// 127.0.0.1 alone.
// Thread safety: free functions; tie_listeners_to_loopback reads this process's descriptor table.
#pragma once

#include <string>

namespace zt {

// True when `host` is loopback on every host: a literal loopback address (127.0.0.0/8, ::1, also
// as "[::1]") or a name every /etc/hosts gives loopback (`localhost`, `localhost.localdomain`,
// `ip6-localhost`, `ip6-loopback`). Any other name is not, even where it resolves to loopback:
// Debian and Ubuntu map a machine's own name to 127.0.1.1 on that machine, while the other hosts of
// a job reach it by that name at its real address (a Slurm-derived MASTER_ADDR, or
// `MASTER_ADDR=$(hostname)`).
bool is_loopback_host(const std::string& host);

// Ties every listening TCP socket of this process on `port` to the loopback device. Returns how
// many it tied (0 when none listens there). Throws CommError naming the socket, the errno and the
// way out when the kernel refuses (Linux before 5.7 wants CAP_NET_RAW for it).
int tie_listeners_to_loopback(int port);

}  // namespace zt
