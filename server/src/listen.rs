//! Where the server listens, and the listener CONFIG SET port/bind opens to replace it.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use crate::sync::lock;

/// The listening socket's address, and the one CONFIG SET port/bind opened to replace it.
#[derive(Default)]
pub struct Listen {
    /// Where the server listens now.
    addr: Mutex<Option<SocketAddr>>,
    /// A listener waiting to replace the acceptor's.
    next: Mutex<Option<std::net::TcpListener>>,
}

impl Listen {
    /// The listener [`Listen::rebind`] opened, for the acceptor to take over.
    pub fn take_next(&self) -> Option<std::net::TcpListener> {
        lock(&self.next).take()
    }

    /// Records the address the server listens on.
    pub fn set_addr(&self, addr: SocketAddr) {
        *lock(&self.addr) = Some(addr);
    }

    /// Opens a listener on `bind` (its first address; `*` for all) and `port` for the
    /// acceptor to take over from its current one; nothing changes when `bind` and `port`
    /// name the address already served.
    ///
    /// # Errors
    /// The address does not resolve, port 0 (no TCP listener here), or the bind fails (a port
    /// in use).
    pub fn rebind(&self, bind: &str, port: &str) -> Result<(), String> {
        let host = bind.split_whitespace().next().unwrap_or("127.0.0.1");
        let host = if host == "*" { "0.0.0.0" } else { host };
        let port: u16 = port.parse().ok().filter(|p| *p != 0).ok_or("no port")?;
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no address")?;
        let old = *lock(&self.addr);
        if old == Some(addr) {
            return Ok(());
        }
        let listener = std::net::TcpListener::bind(addr).map_err(|e| e.to_string())?;
        crate::log::notice!("Now listening on {addr}");
        *lock(&self.next) = Some(listener);
        self.set_addr(addr);
        // The acceptor is blocked in `accept` on the old socket: one connection wakes it (it
        // is served as any other, and closes at once), and it then takes the new listener.
        if let Some(mut old) = old {
            if old.ip().is_unspecified() {
                old.set_ip(if old.is_ipv4() {
                    [127, 0, 0, 1].into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                });
            }
            let _ = std::net::TcpStream::connect_timeout(&old, Duration::from_secs(1));
        }
        Ok(())
    }
}
