//! Starts and stops a real etcd cluster on free loopback ports for the tests
//! (docs/design/cluster.md §8's commands), with each member's data and log in a temp directory.
//! Members are killed on drop, so a failing test leaves nothing running. A missing `etcd` binary
//! fails loudly: with the `etcd` feature on, these tests never skip.

// Each test binary that includes `common` uses a different part of it.
#![allow(dead_code)]

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use skiff_meta::{EtcdOptions, EtcdStore, GetRequest};

/// How long a member may take to answer after (re)start.
const HEALTHY_WITHIN: Duration = Duration::from_secs(30);

pub struct EtcdCluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
}

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl EtcdCluster {
    /// Starts `size` members and waits until each answers.
    pub async fn start(size: usize) -> Self {
        let version = Command::new("etcd").arg("--version").output();
        assert!(
            version.as_ref().is_ok_and(|output| output.status.success()),
            "the `etcd` binary is missing: install Debian's etcd-server (scripts/install-cluster.sh \
             does) to run skiff-meta's etcd tests ({version:?})"
        );
        let members = (1..=size)
            .map(|n| Member {
                name: format!("e{n}"),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let mut cluster = Self {
            dir: tempfile::tempdir().unwrap(),
            members,
        };
        for index in 0..size {
            cluster.spawn(index);
        }
        for index in 0..size {
            cluster.wait_healthy(index).await;
        }
        cluster
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[index].name))
    }

    fn spawn(&mut self, index: usize) {
        let initial_cluster = self.initial_cluster();
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path(index))
            .unwrap();
        let member = &self.members[index];
        let client = format!("http://127.0.0.1:{}", member.client_port);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(self.dir.path().join(format!("{}.etcd", member.name)))
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(initial_cluster)
            .arg("--initial-cluster-token")
            .arg("skiff-meta-test")
            .arg("--initial-cluster-state")
            .arg("new")
            // Metrics on a port of its own would be one more to collide; keep them off 2379x.
            .arg("--listen-metrics-urls")
            .arg(format!("http://127.0.0.1:{}", free_port()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[index].child = Some(child);
    }

    /// `127.0.0.1:port` of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// SIGKILLs a member.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Restarts a killed member on its data directory and waits until it answers.
    pub async fn restart(&mut self, index: usize) {
        self.spawn(index);
        self.wait_healthy(index).await;
    }

    async fn wait_healthy(&self, index: usize) {
        let endpoint = self.endpoints()[index].clone();
        let deadline = Instant::now() + HEALTHY_WITHIN;
        loop {
            let mut options = EtcdOptions::new(vec![endpoint.clone()]);
            options.retry_timeout = Duration::from_millis(500);
            options.request_timeout = Duration::from_millis(500);
            if let Ok(store) = EtcdStore::connect(options).await {
                if store.get(GetRequest::key("/health")).await.is_ok() {
                    return;
                }
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.log_path(index)).unwrap_or_default();
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                panic!(
                    "etcd member {index} not healthy within {HEALTHY_WITHIN:?}; log tail:\n{tail}"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
    }
}
