//! Just enough HTTP/1.1 over `std::net::TcpStream` for the demo's two servers and its load
//! generator: read one request head, write one response with `Content-Length`, and a
//! one-shot `GET` client with `Connection: close`. Every read and write runs under a timeout,
//! so nothing here can hang.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Larger request or response heads are refused.
const MAX_HEAD: usize = 16 * 1024;

/// The parts of a request the demo routes on.
pub struct Request {
    pub path: String,
    /// False when the client sent `Connection: close` (or spoke HTTP/1.0 without keep-alive).
    pub keep_alive: bool,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Reads into `buf` until `done(buf)` says enough has arrived. `Ok(false)` is a clean EOF
/// with nothing buffered (the peer closed an idle keep-alive connection).
fn fill_until(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    mut done: impl FnMut(&[u8]) -> bool,
) -> io::Result<bool> {
    let mut chunk = [0u8; 4096];
    while !done(buf) {
        if buf.len() > MAX_HEAD + (1 << 20) {
            return Err(invalid("message too large"));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(false)
            } else {
                Err(io::Error::from(io::ErrorKind::UnexpectedEof))
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(true)
}

/// The value of header `name` (case-insensitive) in a head's header lines.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

fn content_length(head: &str) -> io::Result<usize> {
    match header(head, "content-length") {
        None => Ok(0),
        Some(v) => v.parse().map_err(|_| invalid("bad Content-Length")),
    }
}

/// Reads one request from `stream` (the socket's read timeout bounds each read). `buf`
/// carries bytes between calls on a keep-alive connection. `Ok(None)`: the client closed the
/// connection cleanly between requests. A request body, if any, is read and discarded.
pub fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Request>> {
    if !fill_until(stream, buf, |b| head_end(b).is_some() || b.len() > MAX_HEAD)? {
        return Ok(None);
    }
    let end = head_end(buf).ok_or_else(|| invalid("request head too large"))?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| invalid("head is not UTF-8"))?;
    let mut parts = head.split("\r\n").next().unwrap_or("").split(' ');
    let (_method, path, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(p), Some(v)) if v.starts_with("HTTP/1.") => (m, p, v),
        _ => return Err(invalid("bad request line")),
    };
    let connection = header(head, "connection").map(str::to_ascii_lowercase);
    let keep_alive = match connection.as_deref() {
        Some("close") => false,
        Some("keep-alive") => true,
        _ => version == "HTTP/1.1",
    };
    let request = Request { path: path.to_string(), keep_alive };
    let total = end + 4 + content_length(head)?;
    if !fill_until(stream, buf, |b| b.len() >= total)? {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    buf.drain(..total);
    Ok(Some(request))
}

/// Writes a complete `text/plain` response (the socket's write timeout bounds it).
pub fn write_response(
    stream: &mut TcpStream,
    status: u16,
    body: &str,
    keep_alive: bool,
) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Unknown",
    };
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: {connection}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

/// Why a client request got no HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The whole exchange did not finish within the client's timeout.
    Timeout,
    /// The connection failed or the response was malformed.
    Failed,
}

fn classify(e: &io::Error) -> ClientError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::Timeout,
        _ => ClientError::Failed,
    }
}

/// One `GET path` on a new connection with `Connection: close`. `timeout` bounds the whole
/// exchange: connect, send, and the full response. Returns the status code.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<u16, ClientError> {
    let deadline = Instant::now() + timeout;
    let remaining = || {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(ClientError::Timeout)
        } else {
            Ok(left)
        }
    };
    let mut stream = TcpStream::connect_timeout(&addr, remaining()?).map_err(|e| classify(&e))?;
    let _ = stream.set_nodelay(true);
    stream.set_write_timeout(Some(remaining()?)).map_err(|e| classify(&e))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| classify(&e))?;

    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut expected: Option<usize> = None;
    loop {
        if let Some(end) = head_end(&buf) {
            let head = std::str::from_utf8(&buf[..end]).map_err(|_| ClientError::Failed)?;
            let total = *expected
                .get_or_insert(end + 4 + content_length(head).map_err(|_| ClientError::Failed)?);
            if buf.len() >= total {
                let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
                return status.ok_or(ClientError::Failed);
            }
        } else if buf.len() > MAX_HEAD {
            return Err(ClientError::Failed);
        }
        stream.set_read_timeout(Some(remaining()?)).map_err(|e| classify(&e))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Err(ClientError::Failed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(classify(&e)),
        }
    }
}
