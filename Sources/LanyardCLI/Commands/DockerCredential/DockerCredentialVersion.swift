extension CredentialHelperCommands {
    static let dockerVersion = dockerAction(
        "version",
        summary: "print the helper's version",
        details: "",
        examples: [CommandExample("docker-credential-lanyard version", "check the helper Docker finds on PATH")]
    ) { inv in
        inv.stdout.line("\(dockerHelperName) (lanyard \(Lanyard.version))")
        return .ok
    }
}
