//! A command in a real terminal: a detached tmux session of 160 x 50, its screen read back
//! as text. The session is killed on drop (tmux sends the command SIGHUP).
//!
//! Each session has a server of its own (`tmux -L`): with one shared server, a test whose
//! session ends takes the server down while another test's `new-session` is connecting to
//! it, and that `new-session` fails (CI saw it once).
use std::{
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

pub struct Tmux {
    session: String,
}

impl Tmux {
    /// `command` in a new session named after `name` and this test process.
    pub fn start(name: &str, command: &str) -> Tmux {
        let session = format!("nodescope-{name}-{}", std::process::id());
        let tmux = Tmux { session };
        let out = tmux
            .command()
            .args([
                "new-session",
                "-d",
                "-s",
                &tmux.session,
                "-x",
                "160",
                "-y",
                "50",
            ])
            .arg(command)
            .output()
            .expect("tmux is installed by `cargo xtask setup`");
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    /// tmux, talking to this session's own server.
    fn command(&self) -> Command {
        let mut tmux = Command::new("tmux");
        tmux.args(["-L", &self.session]);
        tmux
    }

    pub fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Send `keys` (tmux send-keys words), then give the screen two refreshes.
    pub fn keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .args(["send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
        sleep(Duration::from_millis(700));
    }

    /// Wait until the screen shows `needle`; the screen then.
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} never appeared:\n{screen}"
            );
            sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server exits with its only session.
        let _ = self
            .command()
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}
