//! Loss accounting from the kernel's UDP and IP counters (`/proc/net/snmp` for IPv4,
//! `/proc/net/snmp6` for IPv6; Linux). Elsewhere, and on the portable IO path, they are
//! absent: the snapshots return `None`, never zeros.

/// UDP and IP counters of the current network namespace, of one address family (the IPv6
/// ones are `Udp6*` and `Ip6*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// `Udp: InDatagrams`: datagrams delivered to sockets.
    pub udp_in_datagrams: u64,
    /// `Udp: InErrors`: datagrams dropped on receive (all causes).
    pub udp_in_errors: u64,
    /// `Udp: RcvbufErrors`: dropped because a socket's receive buffer was full.
    pub udp_rcvbuf_errors: u64,
    /// `Udp: SndbufErrors`: dropped because a send buffer was full.
    pub udp_sndbuf_errors: u64,
    /// `Ip: ReasmReqds`: fragments needing reassembly.
    pub ip_reasm_reqds: u64,
    /// `Ip: ReasmFails`: reassembly failures.
    pub ip_reasm_fails: u64,
    /// `Ip: FragCreates`: fragments created.
    pub ip_frag_creates: u64,
}

/// The text of `/proc/net/<name>`.
#[cfg(all(target_os = "linux", not(ark_portable)))]
fn read_kernel_table(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/net/{name}")).ok()
}

/// No kernel counter tables off Linux (nor on the portable IO path).
#[cfg(not(all(target_os = "linux", not(ark_portable))))]
fn read_kernel_table(_name: &str) -> Option<String> {
    None
}

impl NetCounters {
    /// Reads the counters now; `None` where `/proc/net/snmp` does not exist or cannot be
    /// parsed, and always off Linux and on the portable IO path ([`ark_reactor::IO_PATH`]).
    pub fn snapshot() -> Option<NetCounters> {
        Self::parse(&read_kernel_table("snmp")?)
    }

    /// Parses the text of `/proc/net/snmp` (header line then value line per protocol).
    pub fn parse(text: &str) -> Option<NetCounters> {
        let lines: Vec<&str> = text.lines().collect();
        let field = |proto: &str, name: &str| -> Option<u64> {
            let prefix = format!("{proto}:");
            let mut rows = lines.iter().filter(|l| l.starts_with(&prefix));
            let header = rows.next()?;
            let values = rows.next()?;
            let index = header.split_whitespace().position(|h| h == name)?;
            values.split_whitespace().nth(index)?.parse().ok()
        };
        Some(NetCounters {
            udp_in_datagrams: field("Udp", "InDatagrams")?,
            udp_in_errors: field("Udp", "InErrors")?,
            udp_rcvbuf_errors: field("Udp", "RcvbufErrors")?,
            udp_sndbuf_errors: field("Udp", "SndbufErrors")?,
            ip_reasm_reqds: field("Ip", "ReasmReqds")?,
            ip_reasm_fails: field("Ip", "ReasmFails")?,
            ip_frag_creates: field("Ip", "FragCreates")?,
        })
    }

    /// Reads the IPv6 counters now (`/proc/net/snmp6`); `None` where it does not exist.
    pub fn snapshot_v6() -> Option<NetCounters> {
        Self::parse_v6(&read_kernel_table("snmp6")?)
    }

    /// The counters of `ipv6`'s family now.
    pub fn snapshot_for(ipv6: bool) -> Option<NetCounters> {
        if ipv6 {
            Self::snapshot_v6()
        } else {
            Self::snapshot()
        }
    }

    /// Parses the text of `/proc/net/snmp6` (one `Name value` per line).
    pub fn parse_v6(text: &str) -> Option<NetCounters> {
        let field = |name: &str| -> Option<u64> {
            text.lines().find_map(|l| {
                let mut parts = l.split_whitespace();
                (parts.next()? == name).then(|| parts.next()?.parse().ok())?
            })
        };
        Some(NetCounters {
            udp_in_datagrams: field("Udp6InDatagrams")?,
            udp_in_errors: field("Udp6InErrors")?,
            udp_rcvbuf_errors: field("Udp6RcvbufErrors")?,
            udp_sndbuf_errors: field("Udp6SndbufErrors")?,
            ip_reasm_reqds: field("Ip6ReasmReqds")?,
            ip_reasm_fails: field("Ip6ReasmFails")?,
            ip_frag_creates: field("Ip6FragCreates")?,
        })
    }

    /// What changed since `earlier` (saturating: counters never go back).
    pub fn since(&self, earlier: &NetCounters) -> NetCounters {
        NetCounters {
            udp_in_datagrams: self
                .udp_in_datagrams
                .saturating_sub(earlier.udp_in_datagrams),
            udp_in_errors: self.udp_in_errors.saturating_sub(earlier.udp_in_errors),
            udp_rcvbuf_errors: self
                .udp_rcvbuf_errors
                .saturating_sub(earlier.udp_rcvbuf_errors),
            udp_sndbuf_errors: self
                .udp_sndbuf_errors
                .saturating_sub(earlier.udp_sndbuf_errors),
            ip_reasm_reqds: self.ip_reasm_reqds.saturating_sub(earlier.ip_reasm_reqds),
            ip_reasm_fails: self.ip_reasm_fails.saturating_sub(earlier.ip_reasm_fails),
            ip_frag_creates: self.ip_frag_creates.saturating_sub(earlier.ip_frag_creates),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 1000 0 0 0 0 0 1000 900 0 0 0 4 2 1 0 0 6 900
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 500 3 7 400 5 2 0 0 0
";

    #[test]
    fn parses_and_subtracts() {
        let c = NetCounters::parse(SAMPLE).unwrap();
        assert_eq!(c.udp_in_datagrams, 500);
        assert_eq!(c.udp_in_errors, 7);
        assert_eq!(c.udp_rcvbuf_errors, 5);
        assert_eq!(c.udp_sndbuf_errors, 2);
        assert_eq!(c.ip_reasm_reqds, 4);
        assert_eq!(c.ip_reasm_fails, 1);
        assert_eq!(c.ip_frag_creates, 6);
        let later = NetCounters {
            udp_rcvbuf_errors: 9,
            ..c
        };
        assert_eq!(later.since(&c).udp_rcvbuf_errors, 4);
        assert!(NetCounters::parse("garbage").is_none());
    }

    #[test]
    fn parses_the_ipv6_counters() {
        let text = "Ip6InReceives 10\nIp6ReasmReqds 4\nIp6ReasmFails 1\nIp6FragCreates 6\nUdp6InDatagrams 500\nUdp6NoPorts 3\nUdp6InErrors 7\nUdp6RcvbufErrors 5\nUdp6SndbufErrors 2\n";
        let c = NetCounters::parse_v6(text).unwrap();
        assert_eq!((c.udp_in_datagrams, c.udp_in_errors), (500, 7));
        assert_eq!((c.udp_rcvbuf_errors, c.udp_sndbuf_errors), (5, 2));
        assert_eq!(
            (c.ip_reasm_reqds, c.ip_reasm_fails, c.ip_frag_creates),
            (4, 1, 6)
        );
        assert!(NetCounters::parse_v6("Ip6InReceives 10\n").is_none());
    }

    #[test]
    fn snapshot_on_this_machine() {
        // Linux has the tables; elsewhere, and on the portable path, absent is the contract.
        let expected = ark_reactor::IO_PATH == "linux";
        assert_eq!(NetCounters::snapshot().is_some(), expected);
        assert_eq!(NetCounters::snapshot_for(false).is_some(), expected);
    }
}
