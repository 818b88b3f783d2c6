"""Who can reach a multi-worker cluster's ports, kept to loopback wherever the engine allows.

Measured with 2 workers on 127.0.0.1 (``ss -ltnp``; TensorFlow 2.21, JAX 0.7.1):

- TensorFlow's gRPC server (its worker service, collectives and coordination
  service) binds the wildcard address whatever host the cluster names: the
  address is written into TensorFlow (``grpc_server_lib.cc``, "0.0.0.0:" plus
  the port) and no option changes it. It has no authentication: a process
  that reaches the port runs ops in the worker, file reads and writes
  included. A cluster whose workers are all on this machine needs no other
  interface, so ``check_tensorflow`` allows it only where this process's
  network has loopback alone (a private network namespace, which
  gpu_launch() makes) or where the user said the network is trusted.
- JAX's coordinator (process 0) binds ``[::]:port`` unless told otherwise;
  ``jax_cluster.join`` binds it to the first worker's address. Gloo (JAX's
  collectives between CPU processes) listens on one ephemeral port per
  process, on the address the host name resolves to unless told; ``join``
  gives it this worker's own host.
- NCCL (collectives between GPUs, on both engines) bootstraps over TCP on
  ephemeral ports of the interface ``NCCL_SOCKET_IFNAME`` names, by default
  the first that is not loopback; ``loopback_nccl`` sets it to ``lo`` for a
  cluster on loopback, unless the user set it. (Not measured: no GPU cluster.)
"""

from __future__ import annotations

import ipaddress
import os
import socket

from gpukeras.core.errors import NetworkExposedError
from gpukeras.core.handles import Record

# Set to true by the user (or by gpu_launch(network = "trusted")) to say that every host that
# can reach this machine may reach the workers' ports.
TRUST_VARIABLE = "GPUKERAS_TRUSTED_NETWORK"
# Where Linux takes ephemeral ports from by default (/proc/sys/net/ipv4/ip_local_port_range).
EPHEMERAL_PORTS = "32768:60999"


def host_of(address: str) -> str:
    """The host of "host:port" ("[::1]:2222" -> "::1")."""
    return address.rsplit(":", 1)[0].strip("[]")


def port_of(address: str) -> int:
    """The port of "host:port"."""
    return int(address.rsplit(":", 1)[1])


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback (127.0.0.0/8, ::1 or localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def all_loopback(workers: list[str]) -> bool:
    """Whether every worker is on this machine's loopback."""
    return all(is_loopback(host_of(address)) for address in workers)


def bind_host(address: str) -> str | None:
    """The address a worker's own listening sockets should bind, for "host:port"; None for
    every interface.

    An IP address or localhost is bound as it is. A host name is bound to what it
    resolves to here, unless that is loopback alone: Debian's /etc/hosts maps the
    machine's own name to 127.0.1.1, while the other machines reach it at another
    address, which a socket bound to loopback would never answer.
    """
    host = host_of(address)
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if host == "localhost":
        return "127.0.0.1"
    try:
        found = [info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]
    except OSError:
        return None
    return next((str(ip) for ip in found if not is_loopback(str(ip))), None)


def bind_address(address: str) -> str | None:
    """The "host:port" to bind: the host ``bind_host`` chooses; None for every interface."""
    host = bind_host(address)
    if host is None:
        return None
    return f"[{host}]:{port_of(address)}" if ":" in host else f"{host}:{port_of(address)}"


def interfaces() -> list[str]:
    """The network interfaces this process's network namespace has."""
    return [name for _, name in socket.if_nameindex()]


def private() -> bool:
    """Whether this process's network has loopback alone, so no other host can reach it."""
    return set(interfaces()) <= {"lo"}


def trusted(flag: bool) -> bool:
    """Whether the user said the network is trusted: ``flag``, or GPUKERAS_TRUSTED_NETWORK."""
    return bool(flag) or os.environ.get(TRUST_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def check_tensorflow(workers: list[str], trusted_network: bool) -> None:
    """Refuse a TensorFlow cluster on loopback whose servers other hosts could reach.

    TensorFlow's servers listen on every interface (see the module's notes). For
    workers all on this machine that is never needed, so it takes a private
    network (gpu_launch()'s) or the user's word that the network is trusted.
    Clusters over several machines need the other interfaces; ``exposure``
    says who can reach them.

    Raises:
        NetworkExposedError: workers all on loopback, another interface up,
            and the network not said to be trusted.
    """
    if not all_loopback(workers) or private() or trusted(trusted_network):
        return
    others = ", ".join(name for name in interfaces() if name != "lo")
    ports = ",".join(str(port_of(address)) for address in workers)
    raise NetworkExposedError(
        f"The workers are all on this machine ({', '.join(workers)}), but TensorFlow's servers "
        f"listen on every network interface (here also {others}), without authentication: "
        "any host that can reach this machine could run code in them. Start the workers "
        "with gpu_launch(), which gives them a network of their own. Or, if every host that "
        "can reach this machine is trusted, or a firewall keeps them out (iptables -A INPUT "
        f"-p tcp -m multiport --dports {ports} ! -i lo -j DROP), say so: gpu_strategy(..., "
        f"trusted_network = TRUE), or {TRUST_VARIABLE}=true in the workers' environment."
    )


def loopback_nccl(workers: list[str]) -> None:
    """Keep NCCL's bootstrap on loopback for a cluster on loopback, unless the user chose."""
    if all_loopback(workers):
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")


def exposure(workers: list[str], index: int, backend: str) -> Record:
    """Who can reach this worker's ports, and the firewall rules that keep others out.

    Returns:
        ``reach``: one sentence (what listens where, and who can reach it);
        ``firewall``: iptables rules for this machine (empty when none is
        needed), the workers on other machines allowed and everyone else kept out.
    """
    own = workers[index]
    port = port_of(own)
    others = sorted(
        {host_of(a) for i, a in enumerate(workers) if i != index and not is_loopback(host_of(a))}
    )
    allow = [f"iptables -A INPUT -p tcp -s {host} -j ACCEPT" for host in others]
    if private():
        return {
            "reach": "only these workers: this process's network has loopback alone "
            "(a private network, as gpu_launch() makes)",
            "firewall": [],
        }
    if backend == "tensorflow":
        said = "; the network was said to be trusted" if all_loopback(workers) else ""
        return {
            "reach": f"TensorFlow listens on port {port} of every interface of this machine, "
            f"without authentication: any host that reaches it can run code in this worker{said}",
            "firewall": [*allow, f"iptables -A INPUT -p tcp --dport {port} ! -i lo -j DROP"],
        }
    if all_loopback(workers):
        return {
            "reach": "this machine only: the coordinator and Gloo listen on loopback "
            "(other users of this machine can reach them too; gpu_launch() keeps them out)",
            "firewall": [],
        }
    where = bind_host(own) or "every interface"
    listening = [f"the coordinator on port {port} of {where}"] if index == 0 else []
    listening.append(f"Gloo (NCCL on GPUs) on ephemeral ports of {where}")
    coordinator = [f"iptables -A INPUT -p tcp --dport {port} ! -i lo -j DROP"] if index == 0 else []
    return {
        "reach": f"{' and '.join(listening)}, without authentication: any host that reaches "
        "them can join the cluster or feed its exchanges",
        "firewall": [
            *allow,
            *coordinator,
            # NEW only: replies to this machine's own connections arrive on these ports too
            f"iptables -A INPUT -p tcp --dport {EPHEMERAL_PORTS} -m conntrack --ctstate NEW "
            "! -i lo -j DROP",
        ],
    }
