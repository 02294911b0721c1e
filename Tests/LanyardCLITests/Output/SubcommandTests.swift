import Foundation
import LanyardCore
import LanyardTestSupport
import Testing

@testable import LanyardCLI

/// The command table's subcommands (`store init`, `codex export`, …): the parser dispatches to
/// each one and checks its own flags.
@Suite struct SubcommandParserTests {
    private func parse(_ words: String...) throws -> (CommandSpec, ParsedArguments) {
        try #require(try Lanyard.parse(words))
    }

    private func usageError(_ words: String...) -> String? {
        do {
            _ = try Lanyard.parse(words)
            return nil
        } catch {
            return error.message
        }
    }

    /// The commands found without building the whole table are the table's own.
    @Test func theQuickCommandsAreTheTablesOwn() {
        for name in Lanyard.quickCommands.map(\.name) {
            let quick = Lanyard.command(named: name)
            let listed = Lanyard.commands.first { $0.name == name }
            #expect(quick != nil && quick?.name == name, "\(name)")
            #expect(
                quick?.summary == listed?.summary && quick?.flags.map(\.name) == listed?.flags.map(\.name),
                "\(name)"
            )
        }
        #expect(Lanyard.command(named: "store")?.name == "store")
        #expect(Lanyard.command(named: "no-such-command") == nil)
    }

    @Test func theParserDispatchesToTheSubcommand() throws {
        let (spec, args) = try parse("store", "init", "--no-passphrase")
        #expect(spec.name == "store init")
        #expect(args.has("no-passphrase"))
        let (migrate, migrateArgs) = try parse("store", "migrate", "work", "personal", "--to", "file")
        #expect(migrate.name == "store migrate")
        #expect(migrateArgs.positionals == ["work", "personal"], "the subcommand's word is not one of its arguments")
        #expect(migrateArgs.value("to") == "file")
        #expect(try parse("git-credential", "setup", "github.com").0.name == "git-credential setup")
        #expect(try parse("docker-credential", "version").0.name == "docker-credential version")
        #expect(try parse("completion", "fish").0.name == "completion fish")
        #expect(try parse("gh", "import", "--hostname", "github.com").0.name == "gh import")
    }

    @Test func eachSubcommandTakesOnlyItsOwnFlags() {
        #expect(
            usageError("store", "init", "--to", "file")
                == "unknown option --to for `lanyard store init` (did you mean `lanyard store migrate --to`?)"
        )
        #expect(
            usageError("store", "migrate", "--no-passphrase", "--to", "file")
                == "unknown option --no-passphrase for `lanyard store migrate` "
                + "(did you mean `lanyard store init --no-passphrase`?)"
        )
        #expect(
            usageError("git-credential", "get", "--apply")
                == "unknown option --apply for `lanyard git-credential get` "
                + "(did you mean `lanyard git-credential setup --apply`?)"
        )
        #expect(
            usageError("store", "migrate", "--dry-rn")?.hasSuffix("(did you mean --dry-run?)") == true,
            "a near miss of its own flag first"
        )
        #expect(
            usageError("codex", "import", "--account", "work") != nil,
            "import adopts into SLOT: no account resolution"
        )
        #expect(usageError("codex", "export", "--account", "work") == nil)
        #expect(usageError("store", "status", "--json") == nil)
        #expect(usageError("completion", "bash", "--json") != nil, "a completion script is not JSON")
    }

    @Test func anUnknownOrMissingSubcommandIsAUsageErrorThatSuggests() {
        #expect(
            usageError("store", "unlok")
                == "unknown store command \"unlok\" (did you mean `unlock`?); "
                + "one of init, seal, unlock, lock, status, migrate"
        )
        #expect(usageError("codex", "exprot")?.contains("(did you mean `export`?)") == true)
        #expect(usageError("store") == "missing store command: one of init, seal, unlock, lock, status, migrate")
        #expect(
            usageError("store", "--json") == "missing store command: one of init, seal, unlock, lock, status, migrate"
        )
        #expect(
            usageError("store", "lock", "extra") == "unexpected argument \"extra\": usage: lanyard store lock [options]"
        )
        #expect(
            usageError("git-credential", "setup")
                == "missing argument: usage: lanyard git-credential setup HOST[/PATH] [options]"
        )
    }

    /// As global options before a command are the command's, options before a subcommand's word
    /// are the subcommand's.
    @Test func optionsBeforeTheSubcommandWordBelongToTheSubcommand() throws {
        let (status, statusArgs) = try parse("--json", "store", "status")
        #expect(status.name == "store status" && statusArgs.has("json"))
        let (migrate, migrateArgs) = try parse("store", "--to", "file", "migrate", "--dry-run")
        #expect(migrate.name == "store migrate" && migrateArgs.value("to") == "file" && migrateArgs.has("dry-run"))
        let (export, exportArgs) = try parse("-a", "work", "codex", "export")
        #expect(export.name == "codex export" && exportArgs.value("account") == "work")
    }

    @Test func helpStopsAtTheGroupOrTheSubcommand() throws {
        let (group, groupArgs) = try parse("store", "--help")
        #expect(group.name == "store" && groupArgs.has("help"))
        let (sub, subArgs) = try parse("store", "init", "--help")
        #expect(sub.name == "store init" && subArgs.has("help"))
        #expect(try parse("store", "-h", "migrate").0.name == "store migrate")
    }

    /// Whether a command runs in `lanyard-net` is decided by the command the line reaches, so a
    /// network subcommand (or a network flag of one) hands off like a top-level command.
    @Test func networkAttributesAreTheSubcommands() throws {
        let quiet = CommandSpec(
            name: "net quiet",
            summary: "s",
            arguments: "",
            minArguments: 0,
            maxArguments: 0,
            flags: [FlagSpec("fetch", "f")],
            prints: false,
            takesAccount: false,
            details: "",
            networkFlags: ["fetch"]
        ) { _ in .ok }
        let online = CommandSpec(
            name: "net online",
            summary: "s",
            arguments: "",
            minArguments: 0,
            maxArguments: 0,
            flags: [],
            prints: false,
            takesAccount: false,
            details: "",
            network: true
        ) { _ in .ok }
        let group = CommandSpec(group: "net", summary: "s", details: "", subcommands: [quiet, online])
        let (a, aArgs) = try ArgumentParser.dispatch(["online"], from: group)
        #expect(a.name == "net online" && a.needsNetwork(aArgs))
        let (b, bArgs) = try ArgumentParser.dispatch(["quiet"], from: group)
        #expect(b.name == "net quiet" && !b.needsNetwork(bArgs))
        let (c, cArgs) = try ArgumentParser.dispatch(["quiet", "--fetch"], from: group)
        #expect(c.needsNetwork(cArgs))
        // In the real table: the provider-talking commands still hand off, and no local
        // subcommand does (codex export and store migrate refresh through the refresh worker).
        #expect(try parse("switch", "--best").0.needsNetwork(try parse("switch", "--best").1))
        #expect(try parse("login").0.needsNetwork(try parse("login").1))
        for words in [
            ["store", "migrate", "--to", "file"], ["codex", "export"], ["codex", "import"], ["gh", "import"],
            ["store", "init"],
        ] {
            let (spec, args) = try #require(try Lanyard.parse(words))
            #expect(!spec.needsNetwork(args), "\(words)")
        }
    }

    @Test func everySubcommandIsNamedAfterItsGroupAndHasItsOwnHelpText() {
        for group in Lanyard.allCommands where group.isGroup {
            #expect(
                group.flags.isEmpty && !group.prints && !group.takesAccount,
                "`\(group.name)` only groups: its flags are its subcommands'"
            )
            for sub in group.subcommands {
                #expect(sub.name == "\(group.name) \(sub.word)")
                #expect(
                    !sub.summary.isEmpty && sub.summary != group.summary,
                    "`\(sub.name)` needs a summary of its own"
                )
                #expect(
                    !sub.details.hasPrefix("\(sub.word):"),
                    "`\(sub.name)`'s text is its own, not a prefixed share of the group's"
                )
                for flag in sub.flags {
                    #expect(!flag.help.hasPrefix("\(sub.word):"), "--\(flag.name) of `\(sub.name)`")
                }
            }
        }
        let groups = Lanyard.allCommands.filter(\.isGroup).map(\.name)
        #expect(groups == ["codex", "gh", "git-credential", "docker-credential", "store", "fleet", "completion"])
    }
}

/// Help as people see it, from the built binary: for every command and subcommand, with examples,
/// grouped at the top, and no stray backslash.
@Suite struct HelpTextTests {
    private func lanyard(_ args: [String]) throws -> (Int32, String, String) {
        try runProcess(
            builtBinary("lanyard"),
            args,
            environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "NO_COLOR": "1"]
        )
    }

    private var documented: [CommandSpec] { Lanyard.documentedCommands }

    @Test func helpWorksForEveryCommandAndSubcommand() throws {
        #expect(documented.count >= 50, "\(documented.count) commands and subcommands")
        for spec in documented {
            let words = spec.name.split(separator: " ").map(String.init)
            let (status, viaHelp, _) = try lanyard(["help"] + words)
            let (flagStatus, viaFlag, _) = try lanyard(words + ["--help"])
            #expect(status == 0 && flagStatus == 0, "\(spec.name)")
            #expect(viaHelp == viaFlag, "`lanyard help \(spec.name)` and `lanyard \(spec.name) --help` differ")
            #expect(
                viaHelp.hasPrefix("Usage: \(spec.usage)\n\n\(MetaCommands.capitalized(spec.summary))."),
                "\(spec.name): \(viaHelp.prefix(200))"
            )
            let options = viaHelp.components(separatedBy: "\nOptions:\n").dropFirst().first ?? ""
            for flag in spec.allFlags {
                #expect(options.contains("--\(flag.name)"), "`\(spec.name) --help` lists no --\(flag.name)")
            }
            for sub in spec.visibleSubcommands {
                #expect(viaHelp.contains("\n  \(sub.word)  "), "`\(spec.name) --help` does not list \(sub.word)")
            }
        }
        let (status, _, stderr) = try lanyard(["help", "store", "unlok"])
        #expect(status == 2 && stderr.contains("did you mean `unlock`?"))
        #expect(try lanyard(["help", "token", "extra"]).0 == 2, "token has no subcommands")
    }

    @Test func everyHelpHasExamplesThatTheParserAccepts() throws {
        for spec in documented {
            #expect(!spec.examples.isEmpty, "`\(spec.name)` has no examples")
            let (_, help, _) = try lanyard(spec.name.split(separator: " ").map(String.init) + ["--help"])
            let section = help.components(separatedBy: "\nExamples:\n").dropFirst().first ?? ""
            for example in spec.examples {
                #expect(
                    section.contains("  $ \(example.command)\n"),
                    "`\(spec.name) --help` does not show \(example.command)"
                )
            }
        }
        var invokesItself = Set<String>()
        for (owner, example) in documented.flatMap({ spec in spec.examples.map { (spec.name, $0) } })
            + Lanyard.examples.map({ ("", $0) })
        {
            // Docker runs the helper under its own name.
            let line = example.command.replacingOccurrences(
                of: "docker-credential-lanyard ",
                with: "lanyard docker-credential "
            )
            for words in DocExamples.commands(in: line) {
                if let problem = DocExamples.check(words) {
                    Issue.record("example of `\(owner)`: \(example.command): \(problem)")
                }
                if (words.filter { !$0.hasPrefix("-") }.prefix(owner.split(separator: " ").count)).joined(
                    separator: " "
                ) == owner {
                    invokesItself.insert(owner)
                }
            }
        }
        let without = documented.map(\.name).filter { !invokesItself.contains($0) }
        #expect(without.isEmpty, "no example runs \(without)")
        let (_, overview, _) = try lanyard(["--help"])
        for example in Lanyard.examples { #expect(overview.contains("  $ \(example.command)\n")) }
    }

    @Test func topLevelHelpListsTheCommandsByGroup() throws {
        let (status, overview, _) = try lanyard(["--help"])
        #expect(status == 0)
        #expect(Lanyard.groups.map(\.title) == ["Accounts", "Tokens", "Tools", "Store", "Agent", "Other"])
        var listed: [String] = []
        var rest = overview[...]
        for group in Lanyard.groups {
            let heading = try #require(
                rest.range(of: "\n\n\(group.title):\n"),
                "no \(group.title) heading, or out of order"
            )
            let body = String(rest[heading.upperBound...]).components(separatedBy: "\n\n").first ?? ""
            let names = body.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
            #expect(names == group.commands.filter { !$0.hidden }.map(\.name), "\(group.title): \(names)")
            listed += names
            rest = rest[heading.upperBound...]
        }
        #expect(
            listed.sorted() == Lanyard.commands.filter { !$0.hidden }.map(\.name).sorted(),
            "each command in exactly one group"
        )
        #expect(overview.contains("\nExamples:\n"))
    }

    /// A `\` at the end of a line in a Swift multi-line literal continues the line; `\\` there
    /// prints a backslash and breaks it. A plain line break inside a sentence breaks it too.
    @Test func noHelpLineEndsWithABackslashOrBreaksInsideASentence() throws {
        var texts: [(String, String)] = [("--help", try lanyard(["--help"]).1)]
        for spec in Lanyard.allCommands {
            let (status, help, _) = try lanyard(["help"] + spec.name.split(separator: " ").map(String.init))
            #expect(status == 0)
            texts.append((spec.name, help))
            for (i, piece) in spec.details.components(separatedBy: "\n").enumerated().dropLast() {
                let next = spec.details.components(separatedBy: "\n")[i + 1]
                #expect(
                    piece.isEmpty || ".:!?".contains(piece.last!) || next.hasPrefix("- "),
                    """
                    `\(spec.name)`'s text breaks a line inside a sentence: \
                    \"…\(piece.suffix(30))\" / \"\(next.prefix(30))…\"
                    """
                )
            }
        }
        let page = try lanyard(["help", "--man"]).1
        let man = try runProcess(
            "/usr/bin/env",
            ["man", "-l", "-P", "cat", "-"],
            environment: ["MANWIDTH": "80", "PATH": "/usr/bin:/bin"],
            stdin: Data(page.utf8)
        )
        texts.append(("the man page", man.1))
        for (name, text) in texts {
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                #expect(!line.hasSuffix("\\"), "\(name): a line ends with a backslash: \(line)")
                #expect(!line.hasSuffix(" "), "\(name): a line ends with a space: \"\(line)\"")
            }
            let description = text.components(separatedBy: "\nOptions:\n").first ?? ""
            if name != "--help" && name != "the man page" {
                for line in description.split(separator: "\n").dropFirst() {
                    #expect(line.count <= MetaCommands.helpWidth, "\(name): \(line.count) columns: \(line)")
                }
            }
        }
    }
}
