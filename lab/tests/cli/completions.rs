//! `lab completions SHELL`: a script for each shell clap_complete knows, generated from the
//! same definitions `lab` parses with (every command is in it).

use super::support::{lab, usage_error};

#[test]
fn every_shell_gets_a_script_naming_every_command() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = lab().args(["completions", shell]).output().unwrap();
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8(output.stdout).unwrap();
        for command in lab::cli::command().get_subcommands() {
            assert!(
                script.contains(command.get_name()),
                "{shell}: no {}",
                command.get_name()
            );
        }
        assert!(script.contains("accepted-results"), "{shell}");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    usage_error(&["completions", "tcsh"], "invalid value 'tcsh'");
}
