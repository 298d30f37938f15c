//! A two-host topology on one machine: two network namespaces joined by a veth pair, for
//! running a benchmark's server in one and its clients in the other, so that traffic crosses
//! a link (with an MTU of our choosing) instead of `lo`.
//!
//! Addresses come from 198.18.0.0/15, which RFC 2544 sets aside for benchmarks, and fd00::/8:
//! the server side is 198.18.0.1 / fd00::1, the client side 198.18.0.2 / fd00::2. The
//! namespaces are named after the process (`ark-<pid>-srv`, `ark-<pid>-cli`) and removed when
//! the [`Topology`] is dropped (deleting a namespace deletes its end of the veth pair).
//! Creating one needs root (`CAP_SYS_ADMIN` and `CAP_NET_ADMIN`) and `ip` from iproute2.
//!
//! ```no_run
//! use ark_bench::netns::{Side, Topology};
//!
//! let topology = Topology::create(1500).expect("root and iproute2");
//! let (program, args) = topology.exec(Side::Client, "ping".as_ref(), &["-c1".into(), "198.18.0.1".into()]);
//! assert_eq!(program.to_str(), Some("ip"));
//! assert_eq!(args[..3], ["netns", "exec", topology.namespace(Side::Client)]);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The server side's IPv4 address.
pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The client side's IPv4 address.
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The server side's IPv6 address.
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The client side's IPv6 address.
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// One end of the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Where the server runs.
    Server,
    /// Where the clients run.
    Client,
}

/// Why the topology could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsError {
    /// The command that failed.
    pub command: String,
    /// What it printed (or why it could not start).
    pub output: String,
}

impl std::fmt::Display for NetnsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot create the network namespaces (root and iproute2's `ip` are needed): `{}` failed: {}",
            self.command,
            self.output.trim()
        )
    }
}

impl std::error::Error for NetnsError {}

/// Two namespaces joined by a veth pair; removed on drop.
#[derive(Debug)]
pub struct Topology {
    server: String,
    client: String,
    mtu: u32,
}

/// Runs `ip args`; the error carries the command and what it printed.
fn ip(args: &[&str]) -> Result<(), NetnsError> {
    let command = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| NetnsError {
            command: command.clone(),
            output: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError {
            command,
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

impl Topology {
    /// Creates the namespaces and the veth pair with `mtu`, addresses on both ends, links up.
    ///
    /// # Errors
    /// A step failed (not root, no `ip`, an MTU the veth refuses); what was made is removed.
    pub fn create(mtu: u32) -> Result<Topology, NetnsError> {
        let pid = std::process::id();
        let topology = Topology {
            server: format!("ark-{pid}-srv"),
            client: format!("ark-{pid}-cli"),
            mtu,
        };
        ip(&["netns", "add", &topology.server])?;
        // From here on, dropping `topology` removes what exists.
        ip(&["netns", "add", &topology.client])?;
        let (s, c) = (topology.server.as_str(), topology.client.as_str());
        let mtu = mtu.to_string();
        ip(&[
            "link", "add", "arks", "netns", s, "mtu", &mtu, "type", "veth", "peer", "name", "arkc",
            "netns", c, "mtu", &mtu,
        ])?;
        for (ns, dev, v4, v6) in [
            (s, "arks", SERVER_V4, SERVER_V6),
            (c, "arkc", CLIENT_V4, CLIENT_V6),
        ] {
            ip(&["-n", ns, "addr", "add", &format!("{v4}/24"), "dev", dev])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                dev,
                "nodad",
            ])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(topology)
    }

    /// The namespace of `side`.
    pub fn namespace(&self, side: Side) -> &str {
        match side {
            Side::Server => &self.server,
            Side::Client => &self.client,
        }
    }

    /// The veth's MTU.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The server's address in the family of `ipv6`.
    pub fn server_ip(&self, ipv6: bool) -> IpAddr {
        if ipv6 {
            SERVER_V6.into()
        } else {
            SERVER_V4.into()
        }
    }

    /// The command that runs `program args` inside `side`'s namespace.
    pub fn exec(&self, side: Side, program: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
        let mut all = vec![
            "netns".to_string(),
            "exec".to_string(),
            self.namespace(side).to_string(),
            program.display().to_string(),
        ];
        all.extend(args.iter().cloned());
        (PathBuf::from("ip"), all)
    }

    /// What the metadata records about it.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "topology": "netns",
            "mtu": self.mtu,
            "server_namespace": self.server,
            "client_namespace": self.client,
            "server_addresses": [SERVER_V4.to_string(), SERVER_V6.to_string()],
            "client_addresses": [CLIENT_V4.to_string(), CLIENT_V6.to_string()],
            "link": "veth",
        })
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.server, &self.client] {
            // A namespace that was never made gives an error here; nothing else to do.
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// Namespaces whose names start with `prefix` (`ip netns list`); empty if it cannot be read.
pub fn namespaces(prefix: &str) -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
