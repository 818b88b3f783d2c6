"""network: who can reach a cluster's ports, and the refusal of a TensorFlow cluster on loopback.

The workers' own sockets are checked where real clusters run (test_multiworker.py,
test_jax_multiworker.py); here the rules, in this process.
"""

from __future__ import annotations

import os
import socket

import pytest

from gpukeras import bridge
from gpukeras.distribute import network


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("localhost", True),
        ("10.0.0.1", False),
        ("::", False),
        ("node-a.example", False),
    ],
)
def test_loopback_hosts_are_told_from_others(host: str, loopback: bool) -> None:
    assert network.is_loopback(host) is loopback


def test_a_worker_binds_its_own_address() -> None:
    assert network.bind_address("127.0.0.1:2222") == "127.0.0.1:2222"
    assert network.bind_address("[::1]:2222") == "[::1]:2222"
    assert network.bind_address("localhost:2222") == "127.0.0.1:2222"
    assert network.bind_address("10.1.2.3:2222") == "10.1.2.3:2222"


def test_a_host_name_that_resolves_to_loopback_here_binds_every_interface() -> None:
    # Debian maps a machine's own name to 127.0.1.1; the other machines reach it elsewhere.
    own = socket.gethostname()
    resolved = {info[4][0] for info in socket.getaddrinfo(own, None, type=socket.SOCK_STREAM)}
    if not all(network.is_loopback(str(ip)) for ip in resolved):
        pytest.skip(f"{own} resolves to {resolved} here")
    assert network.bind_host(f"{own}:2222") is None
    assert network.bind_host("no-such-host.invalid:2222") is None


def exposed_here() -> None:
    if network.private():
        pytest.skip("this process's network has loopback alone")


def test_tensorflow_workers_on_loopback_are_refused_where_other_hosts_reach_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exposed_here()
    monkeypatch.delenv(network.TRUST_VARIABLE, raising=False)
    answer = bridge.answer(
        bridge.function_at("distribute.network:check_tensorflow"),
        {"workers": ["127.0.0.1:2222", "127.0.0.1:2223"], "trusted_network": False},
    )
    assert answer["r_class"] == "gpukeras_error_network_exposed"
    assert answer["traceback"] is None
    message = answer["message"]
    assert "listen on every network interface" in message
    assert "gpu_launch()" in message
    assert "trusted_network = TRUE" in message
    assert "--dports 2222,2223 ! -i lo -j DROP" in message


@pytest.mark.parametrize("variable", ["true", "1", "TRUE", "yes"])
def test_the_users_word_lets_them_through(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    exposed_here()
    workers = ["127.0.0.1:2222", "127.0.0.1:2223"]
    network.check_tensorflow(workers, trusted_network=True)
    monkeypatch.setenv(network.TRUST_VARIABLE, variable)
    network.check_tensorflow(workers, trusted_network=False)


def test_workers_on_several_machines_are_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(network.TRUST_VARIABLE, raising=False)
    network.check_tensorflow(["10.0.0.1:2222", "10.0.0.2:2222"], trusted_network=False)


def test_exposure_says_who_reaches_tensorflow_and_gives_the_rules() -> None:
    exposed_here()
    told = network.exposure(["10.0.0.1:2222", "10.0.0.2:2222"], 1, "tensorflow")
    assert "port 2222 of every interface" in told["reach"]
    assert "without authentication" in told["reach"]
    assert told["firewall"] == [
        "iptables -A INPUT -p tcp -s 10.0.0.1 -j ACCEPT",
        "iptables -A INPUT -p tcp --dport 2222 ! -i lo -j DROP",
    ]


def test_exposure_on_jax_names_the_coordinator_on_the_chief_and_gloo_everywhere() -> None:
    exposed_here()
    workers = ["10.0.0.1:2222", "10.0.0.2:2222"]
    chief, other = (network.exposure(workers, i, "jax") for i in (0, 1))
    assert chief["reach"].startswith("the coordinator on port 2222 of 10.0.0.1 and Gloo")
    assert other["reach"].startswith("Gloo (NCCL on GPUs) on ephemeral ports of 10.0.0.2")
    assert "iptables -A INPUT -p tcp --dport 2222 ! -i lo -j DROP" in chief["firewall"]
    assert "iptables -A INPUT -p tcp --dport 2222 ! -i lo -j DROP" not in other["firewall"]
    assert other["firewall"][-1].startswith("iptables -A INPUT -p tcp --dport 32768:60999")
    on_loopback = network.exposure(["127.0.0.1:1", "127.0.0.1:2"], 0, "jax")
    assert on_loopback["reach"].startswith("this machine only")
    assert on_loopback["firewall"] == []


def test_nccl_stays_on_loopback_for_workers_on_loopback_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    network.loopback_nccl(["10.0.0.1:1", "127.0.0.1:2"])
    assert "NCCL_SOCKET_IFNAME" not in os.environ
    network.loopback_nccl(["127.0.0.1:1", "127.0.0.1:2"])
    assert os.environ["NCCL_SOCKET_IFNAME"] == "lo"
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    network.loopback_nccl(["127.0.0.1:1", "127.0.0.1:2"])
    assert os.environ["NCCL_SOCKET_IFNAME"] == "ib0"
