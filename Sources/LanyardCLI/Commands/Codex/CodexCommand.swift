extension IntegrationCommands {
    static let codex = CommandSpec(
        group: "codex",
        summary: "write a slot into Codex's auth.json, or adopt Codex's sign-in into a slot",
        details: """
            Codex keeps one account in auth.json under its home ($CODEX_HOME, else ~/.codex). export writes a slot \
            there; import adopts the sign-in Codex holds. To make auth.json follow `lanyard switch` and every refresh, \
            set [integrations] codex = true in config.ini; `lanyard exec SLOT -- codex` gives one Codex run its own \
            account instead.
            """,
        examples: [
            CommandExample("lanyard codex import", "adopt the account Codex is signed in to (no second sign-in)"),
            CommandExample("lanyard codex export work", "make Codex use the slot work"),
        ],
        subcommands: [codexExport, codexImport]
    )

    static let codexHomeFlag = FlagSpec("codex-home", value: "DIR", "Codex's home (default $CODEX_HOME, else ~/.codex)")
}
