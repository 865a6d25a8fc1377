//! One builder for running `lab` in a test, after `just`'s `Test` builder (`tests/test.rs`
//! there): the arguments, standard input and environment, then what the run must give (exit
//! code, streams exactly or in part); [`Lab::run`] runs it, checks all of it at once and
//! returns the output for further checks.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Output;

/// What one stream must hold.
#[derive(Debug, Clone)]
enum Expect {
    Exactly(String),
    Contains(Vec<String>),
}

impl Expect {
    fn check(&self, stream: &str, text: &str, label: &str) {
        match self {
            Expect::Exactly(expected) => assert_eq!(text, expected, "{label}: {stream}"),
            Expect::Contains(needles) => {
                for needle in needles {
                    assert!(
                        text.contains(needle.as_str()),
                        "{label}: expected {needle:?} in {stream}: {text:?}"
                    );
                }
            }
        }
    }

    fn and(self, needle: &str) -> Expect {
        match self {
            Expect::Contains(mut needles) => {
                needles.push(needle.to_owned());
                Expect::Contains(needles)
            }
            Expect::Exactly(_) => Expect::Contains(vec![needle.to_owned()]),
        }
    }
}

/// A run of the `lab` binary under test (no real worker or libtorch from the developer's
/// environment); by default it must exit 0.
#[derive(Debug, Clone)]
pub struct Lab {
    args: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    env: Vec<(String, Option<OsString>)>,
    dir: Option<PathBuf>,
    code: i32,
    stdout: Option<Expect>,
    stderr: Option<Expect>,
}

impl Lab {
    /// `lab ARGS...`, expected to succeed with anything on its streams.
    pub fn new<S: Into<OsString> + Clone>(args: &[S]) -> Lab {
        Lab {
            args: args.iter().cloned().map(Into::into).collect(),
            stdin: None,
            env: Vec::new(),
            dir: None,
            code: 0,
            stdout: None,
            stderr: None,
        }
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Lab {
        self.args.push(arg.into());
        self
    }

    /// Bytes on standard input (else none: an empty input).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Lab {
        self.stdin = Some(bytes.into());
        self
    }

    /// An environment variable set for the run.
    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Lab {
        self.env.push((name.to_owned(), Some(value.into())));
        self
    }

    /// An environment variable removed for the run.
    pub fn env_remove(mut self, name: &str) -> Lab {
        self.env.push((name.to_owned(), None));
        self
    }

    /// The folder the run starts in.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Lab {
        self.dir = Some(dir.into());
        self
    }

    /// The exit code the run must give.
    pub fn code(mut self, code: i32) -> Lab {
        self.code = code;
        self
    }

    /// Standard output must be exactly `text`.
    pub fn stdout(mut self, text: &str) -> Lab {
        self.stdout = Some(Expect::Exactly(text.to_owned()));
        self
    }

    /// Standard output must contain `needle` (callable several times).
    pub fn stdout_has(mut self, needle: &str) -> Lab {
        self.stdout = Some(
            self.stdout
                .take()
                .unwrap_or(Expect::Contains(Vec::new()))
                .and(needle),
        );
        self
    }

    /// Standard error must be exactly `text`.
    pub fn stderr(mut self, text: &str) -> Lab {
        self.stderr = Some(Expect::Exactly(text.to_owned()));
        self
    }

    /// Standard error must contain `needle` (callable several times).
    pub fn stderr_has(mut self, needle: &str) -> Lab {
        self.stderr = Some(
            self.stderr
                .take()
                .unwrap_or(Expect::Contains(Vec::new()))
                .and(needle),
        );
        self
    }

    /// Runs `lab`, checks the exit code and the streams, and returns the output.
    pub fn run(self) -> Output {
        let mut command = super::lab();
        command.args(&self.args);
        for (name, value) in &self.env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        command.write_stdin(self.stdin.clone().unwrap_or_default());
        let output = command.output().unwrap();
        let label = format!("lab {:?}", self.args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(self.code),
            "{label}: exit code (stderr {stderr:?})"
        );
        if let Some(expect) = &self.stdout {
            expect.check("stdout", &stdout, &label);
        }
        if let Some(expect) = &self.stderr {
            expect.check("stderr", &stderr, &label);
        }
        output
    }

    /// Runs it expecting a refusal: exit `code`, nothing on standard output, exactly one
    /// stderr line `lab: error: ...` without control characters, containing `needle`.
    /// Returns that line.
    pub fn refused(self, code: i32, needle: &str) -> String {
        let output = self.code(code).stdout("").stderr_has(needle).run();
        let stderr = String::from_utf8(output.stderr).unwrap();
        let line = stderr
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("no final newline: {stderr:?}"));
        assert!(!line.contains('\n'), "more than one line: {stderr:?}");
        assert!(line.starts_with("lab: error: "), "{stderr:?}");
        assert!(!line.chars().any(char::is_control), "{stderr:?}");
        line.to_owned()
    }

    /// Runs it expecting success and returns standard output as one JSON value.
    pub fn json(self) -> serde_json::Value {
        serde_json::from_slice(&self.run().stdout).unwrap()
    }
}
