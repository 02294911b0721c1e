extension GitCredentialCommand {
    static let command = CommandSpec(
        group: "git-credential",
        summary: "git credential helper: hand git a slot's fresh access token",
        details: """
            get, store and erase speak git's credential-helper protocol on stdin and stdout (key=value lines ended by \
            a blank line); git runs them once `lanyard git-credential setup HOST` has configured it. Which slot's \
            token git gets for a host is set in the [git] group of config.ini (HOST = SLOT or HOST/PATH = SLOT).
            """,
        examples: [
            CommandExample(
                "lanyard git-credential setup github.com --apply",
                "make git ask Lanyard for https://github.com"
            ),
            CommandExample(
                "printf 'protocol=https\\nhost=github.com\\n\\n' | lanyard git-credential get",
                "what git would get"
            ),
        ],
        subcommands: [get, store, erase, setup]
    )

    /// What `get`, `store` and `erase` refuse before reading further.
    static let inputLimits = """
        Input that is not text (a NUL byte), a line over 64 KiB or a request over 1 MiB is refused at once (exit 2).
        """
}
