//! INFO.

use bytes::Bytes;
use rediskv::commands::Reply;

/// INFO: a minimal server section.
pub fn info(port: u16) -> Reply {
    Reply::Bulk(Bytes::from(format!(
        "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nos:rediskv\r\narch_bits:64\r\n\
         process_id:{}\r\ntcp_port:{}\r\n\r\n# Clients\r\nconnected_clients:1\r\n\r\n\
         # Persistence\r\nloading:0\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
        std::process::id(),
        port
    )))
}
