import LanyardDesktop

/// `lanyard desktop-icons DIR`, hidden: writes Lanyard's application icon (``LanyardIcon``) into
/// the hicolor theme folder DIR at every size the theme lists. `make install` (and so the .deb)
/// runs the binary it just built, as it does for the man page and the completions: the icons come
/// from the drawing code that ships, never from a copy checked in beside it.
enum DesktopIconsCommand {
    static let command = CommandSpec(
        name: "desktop-icons",
        summary: "internal: write Lanyard's icon into a hicolor theme folder (make install)",
        arguments: "DIR",
        minArguments: 1,
        maxArguments: 1,
        flags: [],
        prints: false,
        takesAccount: false,
        details: "Writes DIR/SIZExSIZE/apps/lanyard.png for each size, mode 0644.",
        hidden: true
    ) { inv in
        for path in try LanyardIcon.install(intoTheme: inv.args.positionals[0]) { inv.stdout.line("\(path)") }
        return .ok
    }
}
