//! A remote in a bucket of an S3-compatible object store (AWS S3, R2, B2, MinIO, Garage,
//! Ceph, SeaweedFS), reached through the `object_store` crate: it signs requests, retries
//! with backoff on server errors and throttling, and maps a failed `If-None-Match: *` to
//! a typed error, which create-if-absent relies on. Its futures run on a small runtime
//! of this backend's own behind the store's synchronous interface.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::path::Path as StorePath;
use object_store::{
    ClientConfigKey, GetOptions, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload,
    RetryConfig,
};

use crate::backend::{check_key, Backend};
use lifeos_store::{Result, StoreError};

/// A bucket (and a prefix in it) as a remote's backend.
pub struct S3Backend {
    store: Arc<AmazonS3>,
    runtime: tokio::runtime::Runtime,
    bucket: String,
    prefix: String,
}

impl S3Backend {
    /// The bucket `bucket` under `prefix` (empty, or ending in `/`). The endpoint and
    /// region default to `AWS_ENDPOINT_URL` and `AWS_REGION`; credentials come from
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and the other variables the AWS
    /// tools read). Plain `http://` is allowed only for an endpoint on this machine.
    pub fn new(
        bucket: &str,
        prefix: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<S3Backend> {
        Self::with_builder(
            AmazonS3Builder::from_env(),
            bucket,
            prefix,
            endpoint,
            region,
        )
    }

    /// As [`S3Backend::new`], with the credentials (and anything else) set in `builder`.
    fn with_builder(
        builder: AmazonS3Builder,
        bucket: &str,
        prefix: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<S3Backend> {
        let location = format!("s3://{bucket}/{prefix}");
        let fail = |reason: String| StoreError::Remote {
            location: location.clone(),
            reason,
        };
        let mut builder = builder
            .with_bucket_name(bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            // What is written is checked by lifeos itself (every object against its id,
            // sealed ones by their tag), so the payload is not hashed a second time for
            // the signature.
            .with_unsigned_payload(true)
            // A server that is restarting answers 500 or 503 for a few seconds: five
            // retries waiting up to 0.25, 0.75, 2.25, 6.75 and 8 s (jittered) ride that
            // out, where the default 100 ms doubling gave up after about 1.5 s.
            .with_retry(RetryConfig {
                backoff: object_store::BackoffConfig {
                    init_backoff: Duration::from_millis(250),
                    max_backoff: Duration::from_secs(8),
                    base: 3.0,
                },
                max_retries: 5,
                retry_timeout: Duration::from_secs(30),
            });
        let endpoint = endpoint
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        if let Some(e) = &endpoint {
            if let Some(rest) = e.strip_prefix("http://") {
                let host = rest.split(['/', ':']).next().unwrap_or_default();
                let local = matches!(host, "127.0.0.1" | "localhost") || rest.starts_with("[::1]");
                if !local {
                    return Err(fail(format!(
                        "endpoint {e} is plain http to another machine; use https:// (plain http is allowed only for 127.0.0.1)"
                    )));
                }
                builder = builder.with_allow_http(true);
                // Plain http to this machine with keys given makes no TLS connection at
                // all (credentials from a role would: STS is https), so the system's
                // certificates, about 80 ms of every command's start, are not loaded.
                let static_keys = [
                    AmazonS3ConfigKey::AccessKeyId,
                    AmazonS3ConfigKey::SecretAccessKey,
                ]
                .iter()
                .all(|k| builder.get_config_value(k).is_some());
                if static_keys {
                    builder = builder.with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::NoSystemCertificates),
                        "true",
                    );
                }
            }
            builder = builder.with_endpoint(e);
        }
        let region = region
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_REGION").ok())
            .unwrap_or_else(|| "us-east-1".into());
        builder = builder.with_region(region);
        let store = builder.build().map_err(|e| fail(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("starting the I/O runtime: {e}")))?;
        Ok(S3Backend {
            store: Arc::new(store),
            runtime,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    fn path(&self, key: &str) -> Result<StorePath> {
        check_key(key)?;
        Ok(StorePath::from(format!("{}{key}", self.prefix)))
    }

    fn fail(&self, doing: &str, key: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Remote {
            location: self.location(),
            reason: format!("{doing} {key}: {e}"),
        }
    }
}

impl Backend for S3Backend {
    fn location(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let path = self.path(key)?;
        let too_large = || crate::backend::too_large(&self.location(), key, max);
        self.runtime.block_on(async {
            let r = match self.store.get(&path).await {
                Ok(r) => r,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.fail("reading", key, e)),
            };
            if r.meta.size > max {
                return Err(too_large());
            }
            // The body is read no further than `max`, whatever the size said.
            let mut out = Vec::new();
            let mut body = r.into_stream();
            while let Some(piece) = body
                .try_next()
                .await
                .map_err(|e| self.fail("reading", key, e))?
            {
                out.extend_from_slice(&piece);
                if out.len() as u64 > max {
                    return Err(too_large());
                }
            }
            Ok(Some(out))
        })
    }

    fn get_range(&self, key: &str, range: Range<u64>, into: &mut Vec<u8>) -> Result<()> {
        let path = self.path(key)?;
        into.clear();
        if range.is_empty() {
            return Ok(());
        }
        let asked = range.end - range.start;
        // The callers' ranges come from pack indexes: an object or a run of them.
        into.reserve((asked as usize).min(64 << 20));
        self.runtime.block_on(async {
            let opts = GetOptions {
                range: Some(range.into()),
                ..GetOptions::default()
            };
            let mut body = self
                .store
                .get_opts(&path, opts)
                .await
                .map_err(|e| self.fail("reading", key, e))?
                .into_stream();
            while let Some(piece) = body
                .try_next()
                .await
                .map_err(|e| self.fail("reading", key, e))?
            {
                into.extend_from_slice(&piece);
                if into.len() as u64 > asked {
                    let e = format!("the server sent more than the {asked} bytes asked for");
                    return Err(self.fail("reading", key, e));
                }
            }
            Ok(())
        })
    }

    fn put(&self, key: &str, bytes: &mut Vec<u8>) -> Result<()> {
        let path = self.path(key)?;
        let body = bytes::Bytes::from(std::mem::take(bytes));
        let sent = self.runtime.block_on(async {
            self.store
                .put(&path, PutPayload::from(body.clone()))
                .await
                .map(|_| ())
                .map_err(|e| self.fail("writing", key, e))
        });
        // The request is done with the body: its allocation comes back, unless a clone
        // of it is still held somewhere (then it is freed when that goes).
        if let Ok(back) = body.try_into_mut() {
            *bytes = back.into();
            bytes.clear();
        }
        sent
    }

    fn create(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        let path = self.path(key)?;
        self.runtime.block_on(async {
            let opts = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match self
                .store
                .put_opts(&path, PutPayload::from(bytes.to_vec()), opts)
                .await
            {
                Ok(_) => Ok(true),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(false),
                Err(e) => Err(self.fail("creating", key, e)),
            }
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>> {
        let under = StorePath::from(format!("{}{prefix}", self.prefix));
        let mut out: Vec<(String, u64)> = self.runtime.block_on(async {
            self.store
                .list(Some(&under))
                .map_ok(|m| (m.location.to_string(), m.size))
                .try_collect::<Vec<_>>()
                .await
                .map_err(|e| self.fail("listing", prefix, e))
        })?;
        out.retain_mut(|(k, _)| match k.strip_prefix(&self.prefix) {
            Some(rest) if rest.starts_with(prefix) && check_key(rest).is_ok() => {
                *k = rest.to_string();
                true
            }
            _ => false,
        });
        out.sort();
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        self.runtime.block_on(async {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.fail("removing", key, e)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// A server on 127.0.0.1 that answers the first request made to it with `response`
    /// and closes the connection: for answers a real S3 server does not give on demand.
    fn answering(response: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            conn.write_all(&response).unwrap();
        });
        (endpoint, server)
    }

    /// A server that sends more than the range asked for, under a Content-Range that
    /// matches the request (the only check `object_store` makes), gets a clear error
    /// naming the object, not a buffer longer than asked.
    #[test]
    fn a_ranged_read_refuses_more_bytes_than_it_asked_for() {
        let body = [b'x'; 20];
        let mut response = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\n\
            Content-Length: 20\r\nConnection: close\r\n\r\n"
            .to_vec();
        response.extend_from_slice(&body);
        let (endpoint, server) = answering(response);
        let keys = AmazonS3Builder::new()
            .with_access_key_id("test")
            .with_secret_access_key("test-secret");
        let backend =
            S3Backend::with_builder(keys, "bucket", "p/", Some(&endpoint), Some("us-east-1"))
                .unwrap();
        let mut into = Vec::new();
        let err = backend
            .get_range("packs/a", 0..10, &mut into)
            .expect_err("20 bytes for 10 asked is an error");
        server.join().unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("reading packs/a") && msg.contains("more than the 10 bytes asked for"),
            "{msg}"
        );
    }
}
