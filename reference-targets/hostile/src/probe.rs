//! Egress probes: each tries one way out of the container and reports what happened, never
//! more than its timeout.
//!
//! Outcomes: `connected` (a TCP handshake or an ICMP echo reply), `refused` (a TCP RST),
//! `timeout` (nothing came back: packets may have left), `unreachable` (the kernel had no
//! route: nothing left), `resolved` / `nxdomain` (a DNS answer), `error` (anything else; the
//! detail says what).
//!
//! DNS is a raw UDP query (no libc resolver: the image is FROM scratch), sent to Docker's
//! embedded resolver `127.0.0.11:53` unless the probe names another. ICMP uses an
//! unprivileged datagram ICMP socket (no capability needed where `ping_group_range` allows
//! it); the errno is reported when it is refused.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The resolver DNS probes ask by default: Docker's embedded DNS server.
pub const EMBEDDED_RESOLVER: &str = "127.0.0.11:53";
/// The default per-probe timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 1500;
/// The largest timeout a probe may ask for.
const MAX_TIMEOUT_MS: u64 = 10_000;

/// What a probe tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A TCP connect to `target` (`ADDR:PORT`, `[V6]:PORT`, or `gateway:PORT` for the
    /// container's own network gateway).
    Tcp,
    /// An `A` query for the name `target` through `resolver`.
    Dns,
    /// An ICMP echo to the address `target` (or `gateway`).
    Icmp,
}

/// One probe to run.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct Spec {
    /// A label echoed in the result.
    pub name: String,
    /// What to try.
    pub kind: Kind,
    /// Where: see [`Kind`].
    pub target: String,
    /// TCP only: the port, when `target` is a bare address (such as the runner value
    /// `{runner: network_gateway}`, which a scenario cannot join with a port).
    #[serde(default)]
    pub port: Option<u16>,
    /// DNS only: the resolver `ADDR:PORT` (default `127.0.0.11:53`).
    #[serde(default)]
    pub resolver: Option<String>,
    /// Milliseconds before giving up (default 1500, at most 10000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// What one probe observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The probe's label.
    pub name: String,
    /// `tcp`, `dns` or `icmp`.
    pub kind: Kind,
    /// The destination actually tried (`gateway` resolved to an address).
    pub target: String,
    /// `connected | refused | timeout | unreachable | resolved | nxdomain | error`.
    pub outcome: &'static str,
    /// The errno, the answer, or why the probe could not run.
    pub detail: String,
    /// How long the probe took.
    pub elapsed_ms: u64,
}

/// Runs every probe in parallel (one thread each) and returns the outcomes in order.
pub fn run_all(specs: &[Spec]) -> Vec<Outcome> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs.iter().map(|spec| scope.spawn(move || run(spec))).collect();
        handles
            .into_iter()
            .zip(specs)
            .map(|(handle, spec)| {
                handle.join().unwrap_or_else(|_| Outcome {
                    name: spec.name.clone(),
                    kind: spec.kind,
                    target: spec.target.clone(),
                    outcome: "error",
                    detail: "the probe thread panicked".into(),
                    elapsed_ms: 0,
                })
            })
            .collect()
    })
}

/// Runs one probe.
pub fn run(spec: &Spec) -> Outcome {
    let timeout = Duration::from_millis(spec.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).clamp(1, MAX_TIMEOUT_MS));
    let started = Instant::now();
    let (target, outcome, detail) = match spec.kind {
        Kind::Tcp => match spec.port.map_or_else(
            || resolve_socket_addr(&spec.target),
            |port| resolve_ip(&spec.target).map(|ip| SocketAddr::new(ip, port)),
        ) {
            Ok(addr) => {
                let (outcome, detail) = tcp(addr, timeout);
                (addr.to_string(), outcome, detail)
            }
            Err(e) => (spec.target.clone(), "error", e),
        },
        Kind::Dns => {
            let resolver = spec.resolver.as_deref().unwrap_or(EMBEDDED_RESOLVER);
            let (outcome, detail) = match resolver.parse::<SocketAddr>() {
                Ok(resolver) => dns(&spec.target, resolver, timeout),
                Err(e) => ("error", format!("bad resolver `{resolver}`: {e}")),
            };
            (format!("{}@{resolver}", spec.target), outcome, detail)
        }
        Kind::Icmp => match resolve_ip(&spec.target) {
            Ok(ip) => {
                let (outcome, detail) = icmp(ip, timeout);
                (ip.to_string(), outcome, detail)
            }
            Err(e) => (spec.target.clone(), "error", e),
        },
    };
    Outcome {
        name: spec.name.clone(),
        kind: spec.kind,
        target,
        outcome,
        detail,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// `gateway:PORT` or a socket address.
fn resolve_socket_addr(target: &str) -> Result<SocketAddr, String> {
    if let Some(port) = target.strip_prefix("gateway:") {
        let port = port.parse::<u16>().map_err(|e| format!("bad port in `{target}`: {e}"))?;
        return Ok(SocketAddr::new(IpAddr::V4(gateway()?), port));
    }
    target.parse().map_err(|e| format!("bad address `{target}` (expected ADDR:PORT or gateway:PORT): {e}"))
}

/// `gateway` or an IP address.
fn resolve_ip(target: &str) -> Result<IpAddr, String> {
    if target == "gateway" {
        return Ok(IpAddr::V4(gateway()?));
    }
    target.parse().map_err(|e| format!("bad address `{target}`: {e}"))
}

/// The container's IPv4 gateway: the default route's gateway, or (on a network without one,
/// like Docker's internal networks) the first address of the first directly connected
/// subnet, which is where Docker puts the bridge's address on the host.
pub fn gateway() -> Result<Ipv4Addr, String> {
    let table =
        std::fs::read_to_string("/proc/net/route").map_err(|e| format!("failed to read /proc/net/route: {e}"))?;
    gateway_from_route_table(&table).ok_or_else(|| "no IPv4 route in /proc/net/route".to_owned())
}

/// See [`gateway`]; `table` is the text of `/proc/net/route` (little-endian hex fields).
pub fn gateway_from_route_table(table: &str) -> Option<Ipv4Addr> {
    let parse = |hex: &str| u32::from_str_radix(hex, 16).ok().map(|v| Ipv4Addr::from(v.to_le_bytes()));
    let routes: Vec<(Ipv4Addr, Ipv4Addr, Ipv4Addr)> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((parse(fields.get(1)?)?, parse(fields.get(2)?)?, parse(fields.get(7)?)?))
        })
        .collect();
    if let Some((_, gw, _)) = routes.iter().find(|(dest, gw, _)| dest.is_unspecified() && !gw.is_unspecified()) {
        return Some(*gw);
    }
    routes
        .iter()
        .find(|(dest, _, mask)| !dest.is_unspecified() && !mask.is_unspecified())
        .map(|(dest, _, mask)| Ipv4Addr::from((u32::from(*dest) & u32::from(*mask)) + 1))
}

/// The errno's name and text, e.g. `ENETUNREACH (Network is unreachable (os error 101))`.
pub fn errno_text(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(1) => "EPERM",
        Some(2) => "ENOENT",
        Some(11) => "EAGAIN",
        Some(12) => "ENOMEM",
        Some(13) => "EACCES",
        Some(22) => "EINVAL",
        Some(28) => "ENOSPC",
        Some(30) => "EROFS",
        Some(93) => "EPROTONOSUPPORT",
        Some(97) => "EAFNOSUPPORT",
        Some(99) => "EADDRNOTAVAIL",
        Some(101) => "ENETUNREACH",
        Some(110) => "ETIMEDOUT",
        Some(111) => "ECONNREFUSED",
        Some(113) => "EHOSTUNREACH",
        Some(_) => "errno",
        None => return e.to_string(),
    };
    format!("{name} ({e})")
}

/// The outcome an I/O error stands for.
fn classify(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(101 | 113 | 99 | 97) => "unreachable",
        Some(111) => "refused",
        Some(110 | 11) => "timeout",
        _ if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => "timeout",
        _ => "error",
    }
}

fn tcp(addr: SocketAddr, timeout: Duration) -> (&'static str, String) {
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(stream) => {
            let local = stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
            ("connected", format!("connected from {local}"))
        }
        Err(e) => (classify(&e), errno_text(&e)),
    }
}

/// Receive one datagram within `timeout` by polling the socket without blocking: gVisor's
/// host network mode (release 20221219) does not honour `SO_RCVTIMEO` on datagram sockets, and
/// a probe must never hang. A timeout reads `EAGAIN`, as an expired `SO_RCVTIMEO` does.
fn recv_within(socket: &UdpSocket, buffer: &mut [u8], timeout: Duration) -> io::Result<usize> {
    socket.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match socket.recv(buffer) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() >= deadline {
                    return Err(io::Error::from_raw_os_error(11));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// A DNS query for the `A` records of `name` with id `id` (recursion desired).
pub fn dns_query(name: &str, id: u16) -> Result<Vec<u8>, String> {
    let mut packet = Vec::with_capacity(18 + name.len());
    packet.extend_from_slice(&id.to_be_bytes());
    packet.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        let len = u8::try_from(label.len()).ok().filter(|l| (1..64).contains(l));
        let Some(len) = len else { return Err(format!("bad DNS name `{name}`")) };
        packet.push(len);
        packet.extend_from_slice(label.as_bytes());
    }
    packet.extend_from_slice(&[0, 0, 1, 0, 1]);
    Ok(packet)
}

/// Reads a DNS answer to query `id`: `(outcome, detail)`.
pub fn dns_answer(reply: &[u8], id: u16) -> (&'static str, String) {
    if reply.len() < 12 || reply[..2] != id.to_be_bytes() {
        return ("error", format!("malformed DNS reply ({} bytes)", reply.len()));
    }
    let rcode = reply[3] & 0x0f;
    let answers = u16::from_be_bytes([reply[6], reply[7]]);
    match rcode {
        0 => {
            let address = first_a_record(reply);
            match address {
                Some(address) => ("resolved", format!("A {address} ({answers} answers)")),
                None => ("error", format!("NOERROR without an A record ({answers} answers)")),
            }
        }
        3 => ("nxdomain", "NXDOMAIN".into()),
        2 => ("error", "SERVFAIL (the resolver could not answer)".into()),
        5 => ("refused", "REFUSED by the resolver".into()),
        other => ("error", format!("DNS rcode {other}")),
    }
}

fn first_a_record(reply: &[u8]) -> Option<Ipv4Addr> {
    let skip_name = |mut at: usize| -> Option<usize> {
        loop {
            let len = *reply.get(at)?;
            if len & 0xc0 == 0xc0 {
                return Some(at + 2);
            }
            if len == 0 {
                return Some(at + 1);
            }
            at += 1 + usize::from(len);
        }
    };
    let questions = u16::from_be_bytes([reply[4], reply[5]]);
    let answers = u16::from_be_bytes([reply[6], reply[7]]);
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(at)? + 4;
    }
    for _ in 0..answers {
        at = skip_name(at)?;
        let header = reply.get(at..at + 10)?;
        let kind = u16::from_be_bytes([header[0], header[1]]);
        let length = usize::from(u16::from_be_bytes([header[8], header[9]]));
        let data = reply.get(at + 10..at + 10 + length)?;
        if kind == 1 && length == 4 {
            return Some(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        at += 10 + length;
    }
    None
}

fn dns(name: &str, resolver: SocketAddr, timeout: Duration) -> (&'static str, String) {
    let id = u16::try_from(std::process::id() & 0xffff).unwrap_or(0x4242) ^ 0x5a5a;
    let query = match dns_query(name, id) {
        Ok(query) => query,
        Err(e) => return ("error", e),
    };
    let bind: SocketAddr = if resolver.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap_or(resolver);
    let socket = match UdpSocket::bind(bind) {
        Ok(socket) => socket,
        Err(e) => return ("error", format!("failed to open a UDP socket: {}", errno_text(&e))),
    };
    let exchange = || -> io::Result<Vec<u8>> {
        socket.connect(resolver)?;
        socket.send(&query)?;
        let mut buffer = [0_u8; 1500];
        let n = recv_within(&socket, &mut buffer, timeout)?;
        Ok(buffer[..n].to_vec())
    };
    match exchange() {
        Ok(reply) => dns_answer(&reply, id),
        Err(e) => (classify(&e), errno_text(&e)),
    }
}

/// An ICMP echo request (the kernel sets the identifier of a datagram ICMP socket).
fn echo_request(v6: bool) -> Vec<u8> {
    let mut packet = vec![if v6 { 128 } else { 8 }, 0, 0, 0, 0, 1, 0, 1];
    packet.extend_from_slice(b"elengtis-hostile");
    if !v6 {
        let mut sum: u32 =
            packet.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        let checksum = !u16::try_from(sum).unwrap_or(0);
        packet[2..4].copy_from_slice(&checksum.to_be_bytes());
    }
    packet
}

fn icmp(ip: IpAddr, timeout: Duration) -> (&'static str, String) {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let (domain, protocol) =
        if ip.is_ipv4() { (Domain::IPV4, Protocol::ICMPV4) } else { (Domain::IPV6, Protocol::ICMPV6) };
    let socket = match Socket::new(domain, Type::DGRAM, Some(protocol)) {
        Ok(socket) => socket,
        Err(e) => return ("error", format!("failed to open a datagram ICMP socket: {}", errno_text(&e))),
    };
    let exchange = || -> io::Result<Vec<u8>> {
        socket.connect(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        let socket: UdpSocket = socket.into();
        socket.send(&echo_request(ip.is_ipv6()))?;
        let mut buffer = [0_u8; 1500];
        let n = recv_within(&socket, &mut buffer, timeout)?;
        Ok(buffer[..n].to_vec())
    };
    match exchange() {
        Ok(reply) if reply.first() == Some(&if ip.is_ipv4() { 0 } else { 129 }) => ("connected", "echo reply".into()),
        Ok(reply) => ("error", format!("unexpected ICMP type {:?}", reply.first())),
        Err(e) => (classify(&e), errno_text(&e)),
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn spec(kind: Kind, target: &str) -> Spec {
        Spec { name: "p".into(), kind, target: target.into(), port: None, resolver: None, timeout_ms: Some(500) }
    }

    #[test]
    fn tcp_tells_connected_from_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let open = listener.local_addr().expect("address").to_string();
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("address").to_string()
        };
        let outcomes = run_all(&[spec(Kind::Tcp, &open), spec(Kind::Tcp, &closed), spec(Kind::Tcp, "nonsense")]);
        assert_eq!(outcomes[0].outcome, "connected", "{outcomes:?}");
        assert_eq!(outcomes[0].target, open);
        assert_eq!(outcomes[1].outcome, "refused", "{outcomes:?}");
        assert!(outcomes[1].detail.starts_with("ECONNREFUSED"), "{outcomes:?}");
        assert_eq!(outcomes[2].outcome, "error", "{outcomes:?}");
        // A bare address and a separate port (a runner value cannot carry the port).
        let (ip, port) = open.rsplit_once(':').expect("ADDR:PORT");
        let mut split = spec(Kind::Tcp, ip);
        split.port = port.parse().ok();
        let outcome = run(&split);
        assert_eq!((outcome.outcome, outcome.target.as_str()), ("connected", open.as_str()), "{outcome:?}");
    }

    #[test]
    fn dns_answers_are_read_over_udp() {
        // A one-shot resolver on loopback answering 192.0.2.7 for any name.
        let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let addr = server.local_addr().expect("address");
        let thread = std::thread::spawn(move || {
            let mut buf = [0_u8; 512];
            let (n, from) = server.recv_from(&mut buf).expect("query");
            let mut reply = buf[..n].to_vec();
            reply[2] = 0x81;
            reply[3] = 0x80;
            reply[7] = 1;
            reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7]);
            server.send_to(&reply, from).expect("reply");
        });
        let mut probe = spec(Kind::Dns, "example.com");
        probe.resolver = Some(addr.to_string());
        let outcome = run(&probe);
        thread.join().expect("resolver thread");
        assert_eq!((outcome.outcome, outcome.detail.as_str()), ("resolved", "A 192.0.2.7 (1 answers)"));
        // Nothing listens: a timeout or a refusal, never `resolved`.
        let silent = UdpSocket::bind("127.0.0.1:0").expect("bind");
        probe.resolver = Some(silent.local_addr().expect("address").to_string());
        assert_eq!(run(&probe).outcome, "timeout");
    }

    #[test]
    fn dns_rcodes_are_classified() {
        let query = dns_query("a.example", 7).expect("query");
        assert_eq!(query[12..], [1, b'a', 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0, 0, 1, 0, 1]);
        let mut reply = query.clone();
        reply[3] = 3;
        assert_eq!(dns_answer(&reply, 7).0, "nxdomain");
        reply[3] = 2;
        assert_eq!(dns_answer(&reply, 7).0, "error");
        assert_eq!(dns_answer(&reply, 8).0, "error");
        assert_eq!(dns_answer(&[1, 2], 7).0, "error");
        assert!(dns_query("bad..name", 1).is_err());
    }

    #[test]
    fn the_gateway_comes_from_the_route_table() {
        let header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
        // An internal network: only the subnet route 172.19.0.0/16.
        let internal = format!("{header}eth0\t000013AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n");
        assert_eq!(gateway_from_route_table(&internal), Some(Ipv4Addr::new(172, 19, 0, 1)));
        // An ordinary bridge: the default route's gateway wins.
        let bridged = format!(
            "{header}eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
             eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        );
        assert_eq!(gateway_from_route_table(&bridged), Some(Ipv4Addr::new(172, 17, 0, 1)));
        assert_eq!(gateway_from_route_table(header), None);
    }
}
