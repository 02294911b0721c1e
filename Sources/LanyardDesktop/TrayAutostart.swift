import FoundationEssentials
import Glibc
import LanyardCore
import LanyardGLib
import LanyardStore
import LanyardSupport
import LanyardSystem

/// The XDG autostart entry of `lanyard tray` (`lanyard tray --install-autostart` and
/// `--uninstall-autostart`): `$XDG_CONFIG_HOME/autostart/lanyard-tray.desktop`, which the session
/// starts at login (or, on GNOME and Plasma, systemd-xdg-autostart-generator turns into
/// `app-lanyard\x2dtray@autostart.service`). The entry carries ``marker``: Lanyard only ever
/// replaces or removes a file that has it, never one the user or another program wrote.
///
/// No `X-systemd-skip=true`: on a systemd-managed session that key would make the generator drop
/// the entry, so the autostart would do nothing unless lanyard-tray.service were enabled too. A
/// user who enables both gets one tray all the same: the second one started finds
/// ``TrayInstanceLock`` taken, says "already running" and exits 0 (see docs/desktop.md).
package enum TrayAutostart {
    /// The entry's file name (its desktop file ID).
    package static let fileName = "lanyard-tray.desktop"
    /// The key and value that mark an entry as Lanyard's own.
    package static let marker = "X-Lanyard-Autostart=true"
    /// Larger files are not read to look for ``marker``: no entry of ours comes near it.
    private static let largestEntry = 64 * 1024

    /// What ``install(executable:environment:force:)`` did.
    package enum Installed: Sendable, Equatable {
        case created
        /// An entry of ours was there with other contents (the binary moved) or `force` replaced
        /// someone else's.
        case replaced
        /// Ours, byte for byte: nothing written.
        case unchanged
    }

    /// What ``uninstall(environment:)`` did.
    package enum Removed: Sendable, Equatable {
        case removed
        case absent
    }

    /// `$XDG_CONFIG_HOME/autostart` (`~/.config/autostart` by default), by the same XDG rules as
    /// Lanyard's own config folder.
    package static func folder(environment: [String: String]) -> String {
        PathText.parent(of: Paths(environment: environment).configDirectory) + "/autostart"
    }

    /// The entry's path.
    package static func path(environment: [String: String]) -> String {
        folder(environment: environment) + "/" + fileName
    }

    /// The entry that runs `executable tray`. The package ships this entry for /usr/local/bin/lanyard
    /// (Packaging/xdg/lanyard-tray.desktop, its prefix rewritten as the units' is; a test holds
    /// the two equal).
    /// - Throws: ``TrayAutostartError/unrepresentable(path:reason:)`` for a path that is not
    ///   absolute, not UTF-8 or holds a control character (the Desktop Entry format has no way to
    ///   say it).
    package static func entry(executable: String) throws(TrayAutostartError) -> String {
        guard executable.hasPrefix("/") else {
            throw .unrepresentable(path: executable, reason: "it is not an absolute path")
        }
        guard executable.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
            throw .unrepresentable(path: executable, reason: "it holds a control character")
        }
        guard String(validating: Array(executable.utf8), as: UTF8.self) != nil else {
            throw .unrepresentable(path: executable, reason: "it is not UTF-8")
        }
        return """
            # Lanyard's XDG autostart entry: starts `lanyard tray` when you log in (docs/desktop.md).
            # `lanyard tray --install-autostart` puts it in ~/.config/autostart, --uninstall-autostart
            # takes it out.
            [Desktop Entry]
            Type=Application
            Name=Lanyard tray
            Comment=Every slot's usage in the tray; switch accounts from its menu
            Exec=\(execValue([executable, "tray"]))
            TryExec=\(stringValue(executable))
            Icon=\(LanyardIcon.name)
            Terminal=false
            NoDisplay=true
            StartupNotify=false
            X-GNOME-Autostart-enabled=true
            \(marker)

            """
    }

    /// An `Exec=` value for `arguments`, by the Desktop Entry spec's rules: an argument holding a
    /// reserved character is double-quoted, with `"`, `` ` ``, `$` and `\` backslash-escaped inside
    /// the quotes; `%` is doubled (it starts field codes); then the value as a whole gets the
    /// format's string escaping, which doubles every backslash again.
    package static func execValue(_ arguments: [String]) -> String {
        let reserved = Set(" \t\n\"'\\><~|&;$*?#()`")
        let quoted = arguments.map { argument -> String in
            let percent = String(argument.flatMap { $0 == "%" ? "%%" : String($0) })
            guard !argument.isEmpty, !percent.contains(where: { reserved.contains($0) }) else {
                var inner = ""
                for character in percent {
                    if "\"`$\\".contains(character) { inner.append("\\") }
                    inner.append(character)
                }
                return "\"" + inner + "\""
            }
            return percent
        }
        return stringValue(quoted.joined(separator: " "))
    }

    /// A value of type string (the format's escaping: `\` is written `\\`; a leading space `\s`).
    package static func stringValue(_ text: String) -> String {
        var escaped = String(text.flatMap { $0 == "\\" ? "\\\\" : String($0) })
        if escaped.hasPrefix(" ") { escaped = "\\s" + escaped.dropFirst() }
        return escaped
    }

    /// Whether `text` is an entry Lanyard wrote: it has ``marker`` on a line of its own (blanks,
    /// which the format allows around `=`, aside).
    package static func isOurs(_ text: String) -> Bool {
        text.split(whereSeparator: \.isNewline).contains { line in
            String(line.filter { $0 != " " && $0 != "\t" }) == marker
        }
    }

    /// Writes the entry for `executable` durably (a temporary file, fsync, rename, fsync of the
    /// folder), mode 0644: it holds no secret, and session managers read it as any autostart file.
    /// The folder is created 0700 when missing (an existing one keeps its mode). An entry that is
    /// not Lanyard's is left alone unless `force`.
    /// - Returns: the path and what was done.
    package static func install(
        executable: String,
        environment: [String: String],
        force: Bool
    ) throws -> (path: String, Installed) {
        let contents = try entry(executable: executable)
        let folder = folder(environment: environment)
        let path = folder + "/" + fileName
        try ensureFolder(folder)
        let existing = try read(path)
        if let existing {
            if existing == contents { return (path, .unchanged) }
            if !isOurs(existing) && !force { throw TrayAutostartError.foreignEntry(path: path, action: "replace") }
        }
        do { try DurableFile.replace(path, with: Data(contents.utf8), mode: 0o644) } catch {
            throw StoreError.io(path: path, detail: error.message(or: "cannot write"))
        }
        return (path, existing == nil ? .created : .replaced)
    }

    /// Removes the entry when it is Lanyard's (durably); one that is not is left alone.
    package static func uninstall(environment: [String: String]) throws -> (path: String, Removed) {
        let path = path(environment: environment)
        guard let existing = try read(path) else { return (path, .absent) }
        guard isOurs(existing) else { throw TrayAutostartError.foreignEntry(path: path, action: "remove") }
        try SecureFiles.removeDurably(path)
        return (path, .removed)
    }

    /// The file's text; nil when there is none. A folder, a file too large to be an entry or one
    /// that is not UTF-8 reads as "" (not ours).
    private static func read(_ path: String) throws -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT {
                // A dangling symbolic link is still a name in the way.
                var link = stat()
                return lstat(path, &link) == 0 ? "" : nil
            }
            throw StoreError.io(path: path, detail: SystemCallError.reason())
        }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_size <= largestEntry else { return "" }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw StoreError.io(path: path, detail: "cannot read: \(error.userFacingDescription)")
        }
        return String(validating: Array(data), as: UTF8.self) ?? ""
    }

    /// Creates `folder` 0700 (and its missing parents, 0700 as XDG wants) unless it exists; an
    /// existing one (perhaps a link into a dotfiles repository) must be a folder.
    private static func ensureFolder(_ folder: String) throws {
        var st = stat()
        if stat(folder, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFDIR else {
                throw StoreError.unsafePath(path: folder, reason: "it is not a folder")
            }
            return
        }
        guard errno == ENOENT else { throw StoreError.io(path: folder, detail: SystemCallError.reason()) }
        do {
            try FileManager.default.createDirectory(
                atPath: folder,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw StoreError.io(path: folder, detail: "cannot create folder: \(error.userFacingDescription)")
        }
    }
}

/// Why the autostart entry was not written or removed.
package enum TrayAutostartError: LanyardError, Equatable {
    /// A file Lanyard did not write is where its entry goes; it was left as it is.
    case foreignEntry(path: String, action: String)
    /// The binary's path cannot be put in an `Exec=` line.
    case unrepresentable(path: String, reason: String)

    package var code: ErrorCode {
        switch self {
        case .foreignEntry: return .unsafePath
        case .unrepresentable: return .integrationUnsupported
        }
    }

    package var errorDescription: String? {
        switch self {
        case .foreignEntry(let path, let action):
            let force = action == "replace" ? " (or use --force to replace it)" : ""
            return "\(TerminalText.escaped(path)) was not written by Lanyard: not going to \(action) it; "
                + "move it aside yourself\(force)"
        case .unrepresentable(let path, let reason):
            return "cannot write an autostart entry for \(TerminalText.escaped(path)): \(reason)"
        }
    }
}
