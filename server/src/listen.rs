//! Where the server listens: a plaintext listener (`port`) and a TLS one (`tls-port`), each
//! optional. The acceptor polls both ([`Listen::watch`]); CONFIG SET port/tls-port/bind
//! replaces one in place ([`Listen::rebind`]): the old socket is closed before the call
//! returns, so the next CONFIG SET may take its port for the other listener.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, OnceLock};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use crate::sync::lock;

/// Which listener: plaintext or TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `port`.
    Plain = 0,
    /// `tls-port`.
    Tls = 1,
}

impl Side {
    /// The side of an acceptor's event token.
    pub fn of(token: Token) -> Side {
        if token.0 == Side::Tls as usize { Side::Tls } else { Side::Plain }
    }
}

/// The listening sockets, and the acceptor's poller they are registered with.
#[derive(Default)]
pub struct Listen {
    listeners: Mutex<[Option<TcpListener>; 2]>,
    registry: OnceLock<Registry>,
}

/// `bind`'s first address (`*`: all) with `port`.
fn resolve(bind: &str, port: u16) -> Result<SocketAddr, String> {
    let host = bind.split_whitespace().next().unwrap_or("127.0.0.1");
    let host = if host == "*" { "0.0.0.0" } else { host };
    std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {host}"))
}

/// Binds a non-blocking listener on `bind`'s first address (`*`: all) and `port` (0: any
/// free port).
///
/// # Errors
/// The address does not resolve, or the bind fails (a port in use).
pub fn listen_on(bind: &str, port: u16) -> Result<TcpListener, String> {
    let addr = resolve(bind, port)?;
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(listener)
}

impl Listen {
    /// Where `side` listens now.
    pub fn addr(&self, side: Side) -> Option<SocketAddr> {
        lock(&self.listeners)[side as usize].as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Puts `listener` in place of `side`'s (None: closes it).
    pub fn put(&self, side: Side, listener: Option<TcpListener>) {
        let mut listeners = lock(&self.listeners);
        if let (Some(registry), Some(old)) = (self.registry.get(), &listeners[side as usize]) {
            let _ = registry.deregister(&mut SourceFd(&old.as_raw_fd()));
        }
        if let (Some(registry), Some(new)) = (self.registry.get(), &listener)
            && let Err(e) =
                registry.register(&mut SourceFd(&new.as_raw_fd()), Token(side as usize), Interest::READABLE)
        {
            crate::log::warning!("Cannot watch the listener: {e}");
        }
        listeners[side as usize] = listener;
    }

    /// Registers the listeners with the acceptor's poller, and those [`Listen::put`] later.
    ///
    /// # Errors
    /// The poller refused one.
    pub fn watch(&self, registry: Registry) -> io::Result<()> {
        let listeners = lock(&self.listeners);
        for (side, listener) in listeners.iter().enumerate() {
            if let Some(listener) = listener {
                registry.register(&mut SourceFd(&listener.as_raw_fd()), Token(side), Interest::READABLE)?;
            }
        }
        let _ = self.registry.set(registry);
        Ok(())
    }

    /// A waiting connection of `side`'s listener; `WouldBlock` when there is none or the
    /// listener is closed.
    ///
    /// # Errors
    /// As `accept(2)`.
    pub fn accept(&self, side: Side) -> io::Result<(TcpStream, SocketAddr)> {
        match &lock(&self.listeners)[side as usize] {
            Some(listener) => listener.accept(),
            None => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Listens for `side` on `bind` and `port` ("0" closes the listener); nothing changes
    /// when they name the address already served.
    ///
    /// # Errors
    /// The port is not a number, the address does not resolve, or the bind fails.
    pub fn rebind(&self, side: Side, bind: &str, port: &str) -> Result<(), String> {
        let port: u16 = port.parse().map_err(|_| "bad port")?;
        if port == 0 {
            self.put(side, None);
            return Ok(());
        }
        if Some(resolve(bind, port)?) == self.addr(side) {
            return Ok(());
        }
        let listener = listen_on(bind, port)?;
        if let Ok(addr) = listener.local_addr() {
            let tls = if side == Side::Tls { " (TLS)" } else { "" };
            crate::log::notice!("Now listening on {addr}{tls}");
        }
        self.put(side, Some(listener));
        Ok(())
    }
}
