//! End-to-end checks of the built `elengtis-sink` binary: the ready line, the exact
//! record lines, the body cap, the `--max-requests` bound, the read deadline against
//! slow clients, and clean exits on stdin EOF and SIGTERM.

#[cfg(test)]
mod tests {
    use std::{
        io::{Read as _, Write as _},
        net::{Shutdown, TcpStream},
        process::{Command, ExitStatus, Stdio},
        sync::mpsc::RecvTimeoutError,
        thread,
        time::{Duration, Instant},
    };

    use elengtis_target_kit::testing::RunningBinary;
    use serde_json::{Value, json};

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-sink");
    const WAIT: Duration = Duration::from_secs(10);

    /// A running sink on 127.0.0.1 with a free port, its stdout lines on a channel.
    struct Sink {
        process: RunningBinary,
        port: u16,
        ready_after: Duration,
    }

    impl Sink {
        fn start(extra: &[&str]) -> Self {
            let started = Instant::now();
            let process =
                RunningBinary::spawn(Command::new(BIN).args(["--bind", "127.0.0.1", "--port", "0"]).args(extra));
            let ready = process.stdout.recv_timeout(WAIT).expect("ready line");
            let ready_after = started.elapsed();
            let value: Value = serde_json::from_str(&ready).expect("ready line is JSON");
            assert_eq!(keys(&value), ["ready", "port"], "{ready}");
            assert_eq!(value["ready"], json!(true));
            let port = value["port"].as_u64().and_then(|p| u16::try_from(p).ok()).expect("port");
            assert_ne!(port, 0);
            assert_eq!(ready, format!(r#"{{"ready":true,"port":{port}}}"#), "compact ready line");
            Self { process, port, ready_after }
        }

        fn connect(&self) -> TcpStream {
            let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
            stream.set_read_timeout(Some(WAIT)).expect("read timeout");
            stream
        }

        /// Sends one raw request (which should say `Connection: close`) and returns
        /// the whole response.
        fn send(&self, raw: &[u8]) -> String {
            let mut stream = self.connect();
            stream.write_all(raw).expect("write request");
            let mut response = Vec::new();
            stream.read_to_end(&mut response).expect("read response");
            String::from_utf8_lossy(&response).into_owned()
        }

        /// The next stdout line as JSON.
        fn next(&self) -> (String, Value) {
            let line = self.process.stdout.recv_timeout(WAIT).expect("a record line");
            let value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            (line, value)
        }

        /// Closes stdin (the runner's attach ending) and waits for the exit.
        fn finish(&mut self) -> ExitStatus {
            drop(self.process.stdin.take());
            self.process.wait()
        }

        /// All lines still to come, once the process has exited.
        fn rest(&self) -> Vec<String> {
            let mut rest = Vec::new();
            loop {
                match self.process.stdout.recv_timeout(WAIT) {
                    Ok(line) => rest.push(line),
                    Err(RecvTimeoutError::Disconnected) => return rest,
                    Err(RecvTimeoutError::Timeout) => panic!("stdout still open"),
                }
            }
        }
    }

    fn keys(value: &Value) -> Vec<&str> {
        value.as_object().expect("object").keys().map(String::as_str).collect()
    }

    /// Checks the fields that vary (time, remote) and returns the record without them.
    fn stable(mut record: Value) -> Value {
        let time = record["time"].as_str().expect("time").to_owned();
        let bytes = time.as_bytes();
        assert_eq!(bytes.len(), 24, "{time}");
        for (i, b) in bytes.iter().enumerate() {
            let expected = match i {
                4 | 7 => b'-',
                10 => b'T',
                13 | 16 => b':',
                19 => b'.',
                23 => b'Z',
                _ => {
                    assert!(b.is_ascii_digit(), "{time}");
                    continue;
                }
            };
            assert_eq!(*b, expected, "{time}");
        }
        let remote = record["remote"].as_str().expect("remote").to_owned();
        assert!(remote.starts_with("127.0.0.1:"), "{remote}");
        assert!(remote["127.0.0.1:".len()..].parse::<u16>().is_ok(), "{remote}");
        let object = record.as_object_mut().expect("object");
        object.remove("time");
        object.remove("remote");
        record
    }

    const FIELDS: [&str; 10] =
        ["seq", "time", "method", "path", "query", "headers", "body", "body_bytes", "body_truncated", "remote"];

    fn ok(response: &str) {
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.to_ascii_lowercase().contains("content-type: text/plain"), "{response}");
        assert!(response.ends_with("\r\n\r\nok"), "{response}");
    }

    #[test]
    fn records_get_post_oversized_head_and_put_exactly() {
        let mut sink = Sink::start(&["--max-body", "16"]);

        let response = sink.send(
            b"GET /collect/a%20b?token=ELENGTIS-0001&x=1 HTTP/1.1\r\nHost: sink:8080\r\nUser-Agent: Probe/1\r\n\
              X-Canary: one\r\nx-canary: two\r\nConnection: close\r\n\r\n",
        );
        ok(&response);
        let (line, record) = sink.next();
        assert_eq!(keys(&record), FIELDS, "{line}");
        assert!(line.contains(r#""headers":{"host":"sink:8080","user-agent":"Probe/1","x-canary":"one, two","#));
        assert_eq!(
            stable(record),
            json!({
                "seq": 1, "method": "GET", "path": "/collect/a%20b", "query": "token=ELENGTIS-0001&x=1",
                "headers": {"host": "sink:8080", "user-agent": "Probe/1", "x-canary": "one, two", "connection": "close"},
                "body": "", "body_bytes": 0, "body_truncated": false,
            })
        );

        let body = r#"{"k":"ELENGTIS"}"#;
        assert_eq!(body.len(), 16);
        let response = sink.send(
            format!(
                "POST / HTTP/1.1\r\nHost: sink\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        ok(&response);
        let (line, record) = sink.next();
        assert_eq!(keys(&record), FIELDS, "{line}");
        assert_eq!(
            stable(record),
            json!({
                "seq": 2, "method": "POST", "path": "/", "query": null,
                "headers": {"host": "sink", "content-type": "application/json", "content-length": "16", "connection": "close"},
                "body": body, "body_bytes": 16, "body_truncated": false,
            })
        );

        // 40 bytes against a 16-byte cap.
        let long = "ELENGTIS-SECRET-0123456789-abcdefghijklm";
        let response = sink.send(
            format!(
                "POST /big HTTP/1.1\r\nHost: sink\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{long}",
                long.len()
            )
            .as_bytes(),
        );
        ok(&response);
        let (_, record) = sink.next();
        assert_eq!(
            stable(record),
            json!({
                "seq": 3, "method": "POST", "path": "/big", "query": null,
                "headers": {"host": "sink", "content-length": "40", "connection": "close"},
                "body": "ELENGTIS-SECRET-", "body_bytes": 40, "body_truncated": true,
            })
        );

        let response = sink.send(b"HEAD /probe HTTP/1.1\r\nHost: sink\r\nConnection: close\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.ends_with("\r\n\r\n"), "HEAD gets no body: {response}");
        let (_, record) = sink.next();
        assert_eq!(
            stable(record),
            json!({
                "seq": 4, "method": "HEAD", "path": "/probe", "query": null,
                "headers": {"host": "sink", "connection": "close"},
                "body": "", "body_bytes": 0, "body_truncated": false,
            })
        );

        let response = sink.send(
            b"PUT /files/x.txt?overwrite HTTP/1.1\r\nHost: sink\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        );
        ok(&response);
        let (_, record) = sink.next();
        assert_eq!(
            stable(record),
            json!({
                "seq": 5, "method": "PUT", "path": "/files/x.txt", "query": "overwrite",
                "headers": {"host": "sink", "content-length": "5", "connection": "close"},
                "body": "hello", "body_bytes": 5, "body_truncated": false,
            })
        );

        assert!(sink.finish().success());
        assert!(sink.rest().is_empty());
    }

    #[test]
    fn chunked_non_utf8_and_custom_methods_on_keep_alive() {
        let mut sink = Sink::start(&["--max-body", "10"]);
        let mut stream = sink.connect();
        // Three requests on one connection: chunked over the cap, invalid UTF-8, a
        // made-up method with an empty query.
        stream
            .write_all(
                b"POST /c HTTP/1.1\r\nHost: sink\r\nTransfer-Encoding: chunked\r\n\r\n\
                  6\r\nabcdef\r\n6\r\nghijkl\r\n3\r\nmno\r\n0\r\n\r\n",
            )
            .expect("write");
        let (_, first) = sink.next();
        stream.write_all(b"POST /b HTTP/1.1\r\nHost: sink\r\nContent-Length: 3\r\n\r\n\xffA\xfe").expect("write");
        let (_, second) = sink.next();
        stream.write_all(b"PROPFIND /d/? HTTP/1.1\r\nHost: sink\r\nConnection: close\r\n\r\n").expect("write");
        let (_, third) = sink.next();
        let mut responses = String::new();
        stream.read_to_string(&mut responses).expect("responses");
        assert_eq!(responses.matches("HTTP/1.1 200 OK").count(), 3, "{responses}");
        assert_eq!(first["remote"], second["remote"], "same connection");
        assert_eq!(first["remote"], third["remote"], "same connection");

        assert_eq!(
            stable(first),
            json!({
                "seq": 1, "method": "POST", "path": "/c", "query": null,
                "headers": {"host": "sink", "transfer-encoding": "chunked"},
                "body": "abcdefghij", "body_bytes": 15, "body_truncated": true,
            })
        );
        assert_eq!(
            stable(second),
            json!({
                "seq": 2, "method": "POST", "path": "/b", "query": null,
                "headers": {"host": "sink", "content-length": "3"},
                "body": "\u{fffd}A\u{fffd}", "body_bytes": 3, "body_truncated": false,
            })
        );
        assert_eq!(
            stable(third),
            json!({
                "seq": 3, "method": "PROPFIND", "path": "/d/", "query": "",
                "headers": {"host": "sink", "connection": "close"},
                "body": "", "body_bytes": 0, "body_truncated": false,
            })
        );
        assert!(sink.finish().success());
    }

    #[test]
    fn a_barrier_line_is_answered_after_every_request_answered_before_it() {
        let mut sink = Sink::start(&["--max-requests", "2"]);
        for path in ["/a", "/b", "/c"] {
            ok(&sink.send(format!("GET {path} HTTP/1.1\r\nHost: sink\r\nConnection: close\r\n\r\n").as_bytes()));
        }
        let stdin = sink.process.stdin.as_mut().expect("stdin");
        // Junk, an over-long line and a malformed barrier are ignored; the sink keeps going.
        stdin.write_all(b"hello\nbarrier a b\n").expect("write");
        stdin.write_all(format!("barrier {}\n", "x".repeat(300)).as_bytes()).expect("write");
        stdin.write_all(b"barrier t-1\n").expect("write");
        stdin.flush().expect("flush");
        let lines: Vec<Value> = (0..4).map(|_| sink.next().1).collect();
        assert_eq!(lines[0]["path"], json!("/a"));
        assert_eq!(lines[1]["path"], json!("/b"));
        assert_eq!(lines[2], json!({"seq": 3, "dropped": true}));
        // Past --max-requests the barrier is still answered, as the only other line.
        assert_eq!(lines[3], json!({"barrier": "t-1"}));
        assert!(sink.finish().success());
        assert!(sink.rest().is_empty());
    }

    #[test]
    fn stdin_eof_stops_listening_and_exits_zero() {
        let mut sink = Sink::start(&[]);
        ok(&sink.send(b"GET /once HTTP/1.1\r\nHost: sink\r\nConnection: close\r\n\r\n"));
        let (_, record) = sink.next();
        assert_eq!(record["path"], json!("/once"));
        let stopped = Instant::now();
        let status = sink.finish();
        assert_eq!(status.code(), Some(0), "{status:?}");
        assert!(stopped.elapsed() < Duration::from_secs(2), "took {:?}", stopped.elapsed());
        assert!(sink.rest().is_empty());
        assert!(TcpStream::connect(("127.0.0.1", sink.port)).is_err(), "still listening");
    }

    #[test]
    fn a_request_in_flight_at_stdin_eof_is_cut_after_the_grace_and_recorded() {
        let mut sink = Sink::start(&[]);
        let mut half_body = sink.connect();
        half_body
            .write_all(b"POST /late HTTP/1.1\r\nHost: sink\r\nContent-Length: 50\r\n\r\nELENGTIS-2")
            .expect("write");
        let mut half_head = sink.connect();
        half_head.write_all(b"GET /never HTTP/1.1\r\nHost: sink\r\n").expect("write");
        thread::sleep(Duration::from_millis(200));

        let stopped = Instant::now();
        let status = sink.finish();
        let took = stopped.elapsed();
        assert_eq!(status.code(), Some(0), "{status:?}");
        assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(4), "took {took:?}");
        let rest = sink.rest();
        assert_eq!(rest.len(), 1, "{rest:?}");
        let mut record: Value = serde_json::from_str(&rest[0]).expect("JSON");
        let error = record["body_error"].as_str().expect("body_error").to_owned();
        assert!(error.contains("shutting down"), "{error}");
        record.as_object_mut().expect("object").remove("body_error");
        assert_eq!(
            stable(record),
            json!({
                "seq": 1, "method": "POST", "path": "/late", "query": null,
                "headers": {"host": "sink", "content-length": "50"},
                "body": "ELENGTIS-2", "body_bytes": 10, "body_truncated": false,
            })
        );
    }

    #[test]
    fn sigterm_exits_zero_even_with_an_idle_connection_open() {
        let mut sink = Sink::start(&[]);
        let _idle = sink.connect();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(sink.process.child.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let status = sink.process.wait();
        assert_eq!(status.code(), Some(0), "{status:?}");
        assert!(sink.rest().is_empty());
    }

    #[test]
    fn max_requests_bounds_the_output_but_not_the_answers() {
        let mut sink = Sink::start(&["--max-requests", "2"]);
        for i in 1..=5 {
            let response =
                sink.send(format!("GET /r{i} HTTP/1.1\r\nHost: sink\r\nConnection: close\r\n\r\n").as_bytes());
            ok(&response);
        }
        let (_, one) = sink.next();
        let (_, two) = sink.next();
        assert_eq!((one["seq"].clone(), one["path"].clone()), (json!(1), json!("/r1")));
        assert_eq!((two["seq"].clone(), two["path"].clone()), (json!(2), json!("/r2")));
        let (line, _) = sink.next();
        assert_eq!(line, r#"{"seq":3,"dropped":true}"#);
        assert!(sink.finish().success());
        assert_eq!(sink.rest(), Vec::<String>::new(), "nothing after the dropped line");
    }

    #[test]
    fn slow_header_client_neither_blocks_others_nor_lasts() {
        let mut sink = Sink::start(&["--read-timeout", "2"]);
        let mut slow = sink.connect();
        let mut writer = slow.try_clone().expect("clone");
        // Drip a never-ending header, one byte every 100 ms: bytes keep arriving, but
        // the request is never complete.
        let drip = thread::spawn(move || {
            let _ = writer.write_all(b"GET /slow HTTP/1.1\r\nHost: sink\r\nX-Slow: ");
            for _ in 0..100 {
                if writer.write_all(b"a").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        thread::sleep(Duration::from_millis(300));

        let fast = Instant::now();
        ok(&sink.send(b"GET /fast HTTP/1.1\r\nHost: sink\r\nConnection: close\r\n\r\n"));
        let (_, record) = sink.next();
        assert_eq!(record["path"], json!("/fast"));
        assert!(fast.elapsed() < Duration::from_secs(1), "fast client waited {:?}", fast.elapsed());

        // The deadline cuts the dripping client off although it never went quiet.
        let cut = Instant::now();
        let mut rest = Vec::new();
        let _ = slow.read_to_end(&mut rest);
        assert!(cut.elapsed() < Duration::from_secs(4), "slow client lasted {:?}", cut.elapsed());
        assert!(!String::from_utf8_lossy(&rest).contains("200 OK"));
        let _ = slow.shutdown(Shutdown::Both);
        drip.join().expect("drip thread");

        assert!(sink.finish().success());
        assert!(sink.rest().is_empty(), "an incomplete head is not a request");
    }

    #[test]
    fn a_body_cut_off_by_the_deadline_is_recorded_as_far_as_it_came() {
        let mut sink = Sink::start(&["--read-timeout", "1"]);
        let mut stream = sink.connect();
        stream
            .write_all(b"POST /partial HTTP/1.1\r\nHost: sink\r\nContent-Length: 100\r\n\r\nELENGTIS-1")
            .expect("write");
        let (line, record) = sink.next();
        let error = record["body_error"].as_str().unwrap_or_else(|| panic!("body_error: {line}")).to_owned();
        assert!(error.contains("read deadline passed"), "{error}");
        let mut expected_keys = FIELDS.to_vec();
        expected_keys.push("body_error");
        assert_eq!(keys(&record), expected_keys);
        let mut record = stable(record);
        record.as_object_mut().expect("object").remove("body_error");
        assert_eq!(
            record,
            json!({
                "seq": 1, "method": "POST", "path": "/partial", "query": null,
                "headers": {"host": "sink", "content-length": "100"},
                "body": "ELENGTIS-1", "body_bytes": 10, "body_truncated": false,
            })
        );
        assert!(sink.finish().success());
    }

    #[test]
    fn ready_comes_fast_and_bind_takes_numeric_addresses_only() {
        let mut sink = Sink::start(&[]);
        assert!(sink.ready_after < Duration::from_secs(2), "ready after {:?}", sink.ready_after);
        assert!(sink.finish().success());

        let output = Command::new(BIN)
            .args(["--bind", "localhost", "--port", "0"])
            .stdin(Stdio::null())
            .output()
            .expect("run the sink");
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        assert!(output.stdout.is_empty(), "nothing on stdout: {output:?}");
    }
}
