import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

@testable import LanyardCLI

/// `--help`, the man page and the three completion scripts are generated from one table; these
/// tests read each of them the way a person or a shell would and check they agree, and that every
/// `lanyard …` example in README.md and docs/ is a command line the parser accepts.
@Suite struct DocumentationTests {
    /// Where a test writes completion scripts and the man page; removed with the test's instance.
    private let scratch = TestHome()
    /// Command name → its long flags, as one surface shows them.
    typealias Surface = [String: Set<String>]

    /// Subcommands are keys of their own (`store migrate`), each with its own flags.
    @Test func helpManPageAndCompletionsListTheSameCommandsAndFlags() async throws {
        let help = try await helpSurface()
        #expect(help.count >= 50, "help lists \(help.count) commands and subcommands")
        #expect(help["refresh-worker"] == nil, "hidden commands stay out of help")
        #expect(help["store migrate"] == ["to", "dry-run", "json", "help", "no-color"])
        #expect(
            help["store init"] == [
                "no-passphrase", "tpm", "tpm-pin", "recovery-file", "recovery-recipient", "no-recovery", "json", "help",
                "no-color",
            ]
        )
        let groups = help.keys.filter { name in help.keys.contains { $0.hasPrefix(name + " ") } }
        let surfaces: [(String, Surface)] = await [
            ("man page", try manPageSurface()),
            ("bash completion", try bashSurface(groups: groups)),
            ("fish completion", try fishSurface(groups: groups)),
            ("zsh completion", try zshSurface()),
        ]
        for (name, surface) in surfaces {
            #expect(surface.keys.sorted() == help.keys.sorted(), "\(name) lists other commands than --help")
            for (command, flags) in help {
                #expect(
                    surface[command] == flags,
                    """
                    \(name): flags of `\(command)` differ from --help: \
                    \(surface[command]?.sorted() ?? []) vs \(flags.sorted())
                    """
                )
            }
        }
    }

    /// The completion scripts skip flag values with one list for every command, which is right
    /// only while each spelling takes a value everywhere or nowhere.
    @Test func eachFlagSpellingTakesAValueEverywhereOrNowhere() async {
        var takesValue: [String: (Bool, String)] = [:]
        for spec in Lanyard.documentedCommands {
            for flag in spec.allFlags {
                for spelling in flag.spellings {
                    if let (seen, first) = takesValue[spelling] {
                        #expect(
                            seen == (flag.value != nil),
                            "\(spelling) takes a value in `\(first)` but not in `\(spec.name)`, or the reverse"
                        )
                    } else {
                        takesValue[spelling] = (flag.value != nil, spec.name)
                    }
                }
            }
        }
        #expect(Set(Completion.valueFlagSpellings) == Set(takesValue.filter { $0.value.0 }.keys))
    }

    @Test func completionsOfferSlotNamesFromTheRegistry() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        try h.addSlot("personal")
        let env = h.environment.merging(["PATH": binDirectory() + ":/usr/bin:/bin"]) { $1 }
        let bash = try await writeScript("bash")
        let bashOut = try runShell(
            [
                "bash", "-c",
                """
                source \(bash)
                COMP_WORDS=(lanyard status ""); COMP_CWORD=2; _lanyard; echo "status: ${COMPREPLY[*]}"
                COMP_WORDS=(lanyard token --account p); COMP_CWORD=3; _lanyard; echo "account: ${COMPREPLY[*]}"
                COMP_WORDS=(lanyard store migrate ""); COMP_CWORD=3; _lanyard; echo "migrate: ${COMPREPLY[*]}"
                """,
            ],
            environment: env
        )
        #expect(bashOut.contains("status: personal work\n"), "\(bashOut)")
        #expect(bashOut.contains("account: personal\n"), "\(bashOut)")
        #expect(bashOut.contains("migrate: personal work\n"), "\(bashOut)")
        let fish = try await writeScript("fish")
        let fishOut = try runShell(
            [
                "fish", "--no-config", "-c",
                "source \(fish); complete -C 'lanyard switch '; complete -C 'lanyard status -a w'",
            ],
            environment: env
        )
        let candidates = fishOut.split(separator: "\n").map { $0.split(separator: "\t").first.map(String.init) ?? "" }
        #expect(candidates.sorted() == ["personal", "work", "work"], "\(fishOut)")
    }

    /// Each shell completes a group's subcommands (with options before them skipped), and then
    /// that subcommand's own flags, flag values and arguments.
    @Test func completionsOfferSubcommandsAndTheirOwnFlags() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        let env = h.environment.merging(["PATH": binDirectory() + ":/usr/bin:/bin"]) { $1 }
        let bashOut = try runShell(
            [
                "bash", "-c",
                """
                source \(try await writeScript("bash"))
                t() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _lanyard; echo "$*|${COMPREPLY[*]}"; }
                t lanyard store ""
                t lanyard --json store s
                t lanyard store init --
                t lanyard store --to file migrate --d
                t lanyard store migrate --to ""
                t lanyard store migrate ""
                t lanyard codex export ""
                t lanyard git-credential setup --
                t lanyard completion ""
                t lanyard help store ""
                t lanyard help ""
                """,
            ],
            environment: env
        )
        let bash = Dictionary(
            uniqueKeysWithValues: bashOut.split(separator: "\n").map {
                let parts = $0.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                return (parts[0], parts.count > 1 ? parts[1] : "")
            }
        )
        #expect(bash["lanyard store "] == "init seal unlock lock status migrate")
        #expect(bash["lanyard --json store s"] == "seal status")
        #expect(
            bash["lanyard store init --"] == "--no-passphrase --tpm --tpm-pin --recovery-file "
                + "--recovery-recipient --no-recovery --json --help --no-color",
            "init's own flags, not migrate's"
        )
        #expect(bash["lanyard store --to file migrate --d"] == "--dry-run")
        #expect(bash["lanyard store migrate --to "] == "secret-service file")
        #expect(bash["lanyard store migrate "] == "work")
        #expect(bash["lanyard codex export "] == "work")
        #expect(bash["lanyard git-credential setup --"] == "--slot --apply --help --no-color")
        #expect(bash["lanyard completion "] == "bash zsh fish")
        #expect(bash["lanyard help store "] == "init seal unlock lock status migrate")
        #expect(bash["lanyard help "]?.hasPrefix("login logout ") == true)

        let fishOut = try runShell(
            [
                "fish", "--no-config", "-c",
                """
                source \(try await writeScript("fish"))
                for line in 'lanyard store ' 'lanyard --json store s' 'lanyard store init --' \
                'lanyard store migrate --to ' 'lanyard codex export ' 'lanyard help codex '
                    echo "$line|"(complete -C $line | string replace -r '\\t.*' '' | string join ' ')
                end
                """,
            ],
            environment: env
        )
        #expect(fishOut.contains("lanyard store |init lock migrate seal status unlock\n"), "\(fishOut)")
        #expect(fishOut.contains("lanyard --json store s|seal status\n"), "\(fishOut)")
        #expect(
            fishOut.contains(
                "lanyard store init --|--help --json --no-color --no-passphrase "
                    + "--no-recovery --recovery-file --recovery-recipient --tpm --tpm-pin\n"
            ),
            "\(fishOut)"
        )
        #expect(fishOut.contains("lanyard store migrate --to |file secret-service\n"), "\(fishOut)")
        #expect(fishOut.contains("lanyard codex export |work\n"), "\(fishOut)")
        #expect(fishOut.contains("lanyard help codex |export import\n"), "\(fishOut)")

        // zsh's completion system needs an interactive shell; its helpers are stood in for by
        // functions that print what they were asked to offer, and the script's own functions run.
        let zshOut = try runShell(
            [
                "zsh", "-f", "-c",
                """
                _describe() { local name=${@[-1]}; print -r -- "describe ${(j: :)${(@)${(P)name}%%:*}}"; }
                _arguments() { print -r -- "arguments ${(j: :)${(@M)@:#*--*}}"; }
                source <(sed '$d' \(try await writeScript("zsh")))
                t() { words=("$@"); CURRENT=$#; curcontext=":complete:lanyard:"; _lanyard; }
                t lanyard store ""
                t lanyard store init --
                t lanyard store migrate --
                t lanyard completion ""
                """,
            ],
            environment: env
        )
        let zsh = zshOut.split(separator: "\n").map(String.init)
        #expect(zsh.count == 4, "\(zshOut)")
        #expect(zsh.first == "describe init seal unlock lock status migrate")
        #expect(
            zsh.dropFirst().first.map { $0.contains("--no-passphrase[") && !$0.contains("--to[") } == true,
            "\(zshOut)"
        )
        #expect(
            zsh.dropFirst(2).first.map {
                $0.contains("--to[") && $0.contains("--dry-run[") && !$0.contains("--no-passphrase")
            } == true
        )
        #expect(zsh.last == "describe bash zsh fish")
    }

    @Test func listNamesPrintsOnlySlotNames() async throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        try h.addSlot("personal")
        let r = await h.run("list", "--names")
        #expect(r.status == 0)
        #expect(r.stdout == "personal\nwork\n")
    }

    @Test func manPageIsValidRoff() async throws {
        let page = try writeTemp(await CLIHarness().run("help", "--man").stdout, name: "lanyard.1")
        let lint = try runShell(["mandoc", "-T", "lint", "-W", "warning", page], environment: [:], allowFailure: true)
        #expect(lint.isEmpty, "mandoc -T lint: \(lint)")
        let rendered = try runShell(
            ["man", "-l", "-P", "cat", page],
            environment: ["MANWIDTH": "80", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"]
        )
        for section in ["NAME", "SYNOPSIS", "COMMANDS", "OPTIONS", "EXAMPLES", "ENVIRONMENT", "FILES", "EXIT STATUS"] {
            #expect(rendered.contains("\n\(section)\n"), "man page has no \(section) section")
        }
        // Every command and subcommand has an entry, ending with its examples set as code.
        for spec in Lanyard.documentedCommands {
            let entry = try #require(
                rendered.components(separatedBy: "\n   \(spec.usage)\n").dropFirst().first,
                "no entry for \(spec.name)"
            )
            for example in spec.examples {
                #expect(
                    entry.contains("\n                  \(example.command)\n"),
                    "\(spec.name)'s entry lacks \(example.command)"
                )
            }
        }
        for example in Lanyard.examples { #expect(rendered.contains("\n           \(example.command)\n")) }
        for status in ExitStatus.allCases {
            #expect(rendered.contains("       \(status.rawValue) "), "exit status \(status.rawValue) missing")
        }
        for entry in Lanyard.environment { #expect(rendered.contains(entry.name)) }
    }

    @Test func cliReferenceDocumentsEveryEnvironmentVariableAndExitStatus() async throws {
        let cli = try String(contentsOfFile: repositoryRoot.path + "/docs/cli.md", encoding: .utf8)
        let missingVariables = Lanyard.environment.map(\.name).filter { !cli.contains("| `\($0)` |") }
        #expect(missingVariables.isEmpty, "docs/cli.md does not document \(missingVariables)")
        let missingStatuses = ExitStatus.allCases.filter { !cli.contains("| \($0.rawValue) | \($0.meaning) |") }.map(
            \.rawValue
        )
        #expect(missingStatuses.isEmpty, "docs/cli.md's exit table differs for \(missingStatuses)")
        let missingCommands = Lanyard.commands.filter { !$0.hidden && !cli.contains("### `lanyard \($0.name)") }.map(
            \.name
        )
        #expect(missingCommands.isEmpty, "docs/cli.md has no section for \(missingCommands)")
    }

    /// Every command and subcommand has a heading in docs/cli.md (`#### \`lanyard store migrate …\``,
    /// or alternatives: `lanyard completion bash|zsh|fish`), and the section under it names each of
    /// its flags (`--json` for those that print, `--account` for those that resolve a slot).
    @Test func cliReferenceDocumentsEveryCommandAndSubcommandWithItsFlags() async throws {
        let cli = try String(contentsOfFile: repositoryRoot.path + "/docs/cli.md", encoding: .utf8)
        let lines = cli.components(separatedBy: "\n")
        // The section each command's most specific heading opens: up to the next heading of the same or a higher level.
        var sections: [String: String] = [:]
        for (index, line) in lines.enumerated() where line.hasPrefix("### ") || line.hasPrefix("#### ") {
            let level = line.prefix { $0 == "#" }.count
            let end =
                lines[(index + 1)...].firstIndex { $0.hasPrefix("#") && $0.prefix { $0 == "#" }.count <= level }
                ?? lines.count
            let body = lines[index..<end].joined(separator: "\n")
            for name in DocExamples.commandsNamed(byHeading: line) { sections[name] = body }
        }
        var problems: [String] = []
        for spec in Lanyard.documentedCommands {
            guard let section = sections[spec.name] else {
                problems.append("no heading for `lanyard \(spec.name)`")
                continue
            }
            for flag in spec.allFlags where !globalFlags.contains(where: { $0.name == flag.name }) {
                if !section.contains("--\(flag.name)") {
                    problems.append("`lanyard \(spec.name)`'s section does not mention --\(flag.name)")
                }
            }
        }
        #expect(problems.isEmpty, "docs/cli.md:\n\(problems.joined(separator: "\n"))")
    }

    @Test func everyLanyardExampleInTheDocsIsAcceptedByTheParser() async throws {
        var checked = 0
        var failures: [String] = []
        for file in try documentationFiles() {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            for (line, example) in DocExamples.extract(from: text) {
                let where_ =
                    "\(file.replacingOccurrences(of: repositoryRoot.path + "/", with: "")):\(line): "
                    + "lanyard \(example.joined(separator: " "))"
                if let problem = DocExamples.check(example) {
                    failures.append("\(where_): \(problem)")
                } else {
                    checked += 1
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) examples are not accepted:\n\(failures.joined(separator: "\n"))")
        #expect(checked >= 80, "only \(checked) examples found: is the extraction broken?")
        print("documentation: \(checked) lanyard command lines accepted")
    }

    @Test func relativeLinksInTheDocsPointAtFiles() async throws {
        var broken: [String] = []
        for file in try documentationFiles() {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            let folder = (file as NSString).deletingLastPathComponent
            for target in matches(of: #"\]\(([^)#\s]+)(?:#[^)]*)?\)"#, in: text)
            where !target.contains("://") && !target.hasPrefix("mailto:") {
                if !FileManager.default.fileExists(atPath: folder + "/" + target) {
                    broken.append("\(file): \(target)")
                }
            }
        }
        #expect(broken.isEmpty, "links to missing files: \(broken)")
    }

    @Test func configurationExampleInTheCLIReferenceLoadsCleanly() async throws {
        let cli = try String(contentsOfFile: repositoryRoot.path + "/docs/cli.md", encoding: .utf8)
        let example = try #require(
            cli.components(separatedBy: "```ini\n").dropFirst().first?.components(separatedBy: "```").first
        )
        let h = CLIHarness()
        try FileManager.default.createDirectory(atPath: h.root + "/config/lanyard", withIntermediateDirectories: true)
        let path = h.root + "/config/lanyard/config.ini"
        try example.write(toFile: path, atomically: true, encoding: .utf8)
        let loaded = try ConfigFile.load(path: path)
        #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
        #expect(loaded.config.backend == .auto)
        #expect(loaded.config.unlockCacheSeconds == 900)
        #expect(loaded.config.keyringCollection == "default")
        #expect(loaded.config.providers["example"]?.accountClaim == "org.example/account_id")
        #expect(loaded.config.providers["example"]?.kubeToken == .idToken)
        #expect(loaded.config.providers["github"]?.environment == ["GH_TOKEN": "access_token"])
        #expect(loaded.config.gitCredentials.count == 2)
        #expect(loaded.config.dockerCredentials == ["ghcr.io": try Slot("work")])
        #expect(loaded.config.netrcCredentials == ["api.example.com": try Slot("work")])
        #expect(loaded.config.streaming == .default)
    }

    @Test func exampleCheckerRejectsWhatTheParserRejects() async {
        #expect(DocExamples.check(["lgin"]) != nil)
        #expect(DocExamples.check(["login", "--qrcode"]) != nil)
        #expect(DocExamples.check(["store", "unlok"]) != nil)
        #expect(
            DocExamples.check(["store", "init|unlock|lockk"]) != nil,
            "synopsis alternatives are checked one by one"
        )
        #expect(DocExamples.check(["store", "init", "[--dry-run]"]) != nil, "a synopsis's flags are its subcommand's")
        #expect(
            DocExamples.check(["store", "migrate", "--to", "secret-service|file", "[--dry-run]", "[SLOT…]"]) == nil
        )
        #expect(
            DocExamples.check(["store", "init|migrate", "[--dry-run]"]) == nil,
            "a flag of one of the alternatives"
        )
        #expect(
            DocExamples.commandsNamed(byHeading: "### `lanyard completion bash|zsh|fish`")
                == ["completion", "completion bash", "completion zsh", "completion fish"]
        )
        #expect(
            DocExamples.commandsNamed(
                byHeading: "#### `lanyard store migrate --to secret-service|file [SLOT…]`, `lanyard version`"
            )
                == ["store", "store migrate", "version"]
        )
        #expect(DocExamples.check(["refresh", "[SLOT", "|", "--every]"]) != nil)
        #expect(DocExamples.check(["env", "--shell", "tcsh"]) != nil)
        #expect(DocExamples.check(["refresh", "[SLOT", "|", "--all]", "[--json]"]) == nil)
        #expect(DocExamples.check(["exec", "--account", "work", "--", "codex", "--model", "x"]) == nil)
        #expect(
            DocExamples.extract(from: "```sh\ncurl -H \"Authorization: Bearer $(lanyard token)\" …\n```\n").map(\.1)
                == [["token"]]
        )
        #expect(
            DocExamples.extract(from: "Run `lanyard login work --qr` or `.build/debug/lanyard list | head`.\n").map(\.1)
                == [["login", "work", "--qr"], ["list"]]
        )
    }

    // MARK: surfaces

    private func helpSurface() async throws -> Surface {
        let h = CLIHarness()
        let overview = await h.run("help").stdout
        // The command lines of the grouped list: two spaces, a name, two or more spaces.
        let list = overview.components(separatedBy: "\nExamples:\n").first ?? ""
        let names = matches(of: #"(?m)^  ([a-z-]+)  +\S"#, in: list)
        var surface: Surface = [:]
        func read(_ words: [String]) async {
            let text = await h.run(words + ["--help"]).stdout
            let name = words.joined(separator: " ")
            surface[name] = Set(matches(of: #"(?m)^  (?:-\w, |    )--([a-z-]+)"#, in: text))
            #expect(!surface[name]!.isEmpty, "`\(name) --help` lists no options")
            let commands =
                text.components(separatedBy: "\nCommands:\n").dropFirst().first?.components(separatedBy: "\n\n").first
                ?? ""
            for sub in matches(of: #"(?m)^  ([a-z-]+)  +\S"#, in: commands) { await read(words + [sub]) }
        }
        for name in names { await read([name]) }
        return surface
    }

    private func manPageSurface() async throws -> Surface {
        let page = await CLIHarness().run("help", "--man").stdout.replacingOccurrences(of: "\\-", with: "-")
        let sections = page.components(separatedBy: "\n.SH ")
        let commands = try #require(sections.first { $0.hasPrefix("COMMANDS") })
        let options = try #require(sections.first { $0.hasPrefix("OPTIONS") })
        let global = Set(matches(of: #"\\fB--([a-z-]+)\\fR"#, in: options))
        var surface: Surface = [:]
        for block in commands.components(separatedBy: "\n.SS ").dropFirst() {
            let name = try #require(matches(of: #"^"lanyard ([a-z-]+(?: [a-z][a-z-]*)*)"#, in: block).first)
            let flags = block.components(separatedBy: "\n.TP\n").dropFirst().compactMap {
                matches(of: #"^(?:\\fB-\w\\fR, )?\\fB--([a-z-]+)\\fR"#, in: $0).first
            }
            surface[name] = Set(flags).union(global)
        }
        return surface
    }

    /// What bash completes: the commands, each one's flags after `--`, and for a group its
    /// subcommands and theirs.
    private func bashSurface(groups: [String]) async throws -> Surface {
        let script = try await writeScript("bash")
        let out = try runShell(
            [
                "bash", "-c",
                """
                source \(script)
                groups=" \(groups.joined(separator: " ")) "
                COMP_WORDS=(lanyard ""); COMP_CWORD=1; _lanyard
                for cmd in "${COMPREPLY[@]}"; do
                    COMP_WORDS=(lanyard "$cmd" --); COMP_CWORD=2; _lanyard
                    echo "$cmd ${COMPREPLY[*]}"
                    if [[ $groups == *" $cmd "* ]]; then
                        COMP_WORDS=(lanyard "$cmd" ""); COMP_CWORD=2; _lanyard
                        for sub in "${COMPREPLY[@]}"; do
                            COMP_WORDS=(lanyard "$cmd" "$sub" --); COMP_CWORD=3; _lanyard
                            echo "$cmd/$sub ${COMPREPLY[*]}"
                        done
                    fi
                done
                """,
            ],
            environment: ["PATH": "/usr/bin:/bin"]
        )
        return surface(lines: out)
    }

    private func fishSurface(groups: [String]) async throws -> Surface {
        let script = try await writeScript("fish")
        let out = try runShell(
            [
                "fish", "--no-config", "-c",
                """
                source \(script)
                for cmd in (complete -C 'lanyard ' | string replace -r '\\t.*' '')
                    echo $cmd (complete -C "lanyard $cmd --" | string replace -r '\\t.*' '')
                    if contains -- $cmd \(groups.joined(separator: " "))
                        for sub in (complete -C "lanyard $cmd " | string replace -r '\\t.*' '')
                            echo $cmd/$sub (complete -C "lanyard $cmd $sub --" | string replace -r '\\t.*' '')
                        end
                    end
                end
                """,
            ],
            environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        )
        return surface(lines: out)
    }

    /// zsh completion needs an interactive shell to run; the script is syntax-checked by zsh and
    /// read for its functions: a group's lists its subcommands, a command's its `_arguments` specs.
    private func zshSurface() async throws -> Surface {
        let text = await CLIHarness().run("completion", "zsh").stdout
        _ = try await runShell(["zsh", "-n", try writeScript("zsh")], environment: [:])
        let regex = try NSRegularExpression(pattern: #"(?ms)^(_lanyard|_lanyard_cmd_[a-z_-]+)\(\) \{\n(.*?)\n\}$"#)
        var surface: Surface = [:]
        var listed: [String] = []
        for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let function = String(text[Range(match.range(at: 1), in: text)!])
            let body = String(text[Range(match.range(at: 2), in: text)!])
            let name =
                function == "_lanyard"
                ? "" : String(function.dropFirst("_lanyard_cmd_".count)).replacingOccurrences(of: "_", with: " ")
            if let list = body.components(separatedBy: "commands=(\n").dropFirst().first?.components(
                separatedBy: "\n  )"
            ).first {
                listed += matches(of: #"(?m)^    '([a-z-]+):"#, in: list).map { name.isEmpty ? $0 : "\(name) \($0)" }
            }
            if !name.isEmpty { surface[name] = Set(matches(of: #"(?:'|,)--([a-z-]+)(?:\[|\})"#, in: body)) }
        }
        #expect(listed.sorted() == surface.keys.sorted(), "zsh: the commands listed and those with a function differ")
        return surface
    }

    private func surface(lines: String) -> Surface {
        var surface: Surface = [:]
        for line in lines.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            guard let name = words.first?.replacingOccurrences(of: "/", with: " ") else { continue }
            surface[name] = Set(words.dropFirst().filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) })
        }
        return surface
    }

    // MARK: helpers

    private func writeScript(_ shell: String) async throws -> String {
        try writeTemp(await CLIHarness().run("completion", shell).stdout, name: "lanyard.\(shell)")
    }

    private func writeTemp(_ text: String, name: String) throws -> String {
        let path = scratch.root + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Runs a program (found by /usr/bin/env) and returns stdout then stderr; fails on a non-zero exit.
    private func runShell(_ argv: [String], environment: [String: String], allowFailure: Bool = false) throws -> String
    {
        let (status, stdout, stderr) = try runProcess(
            "/usr/bin/env",
            argv,
            environment: environment.isEmpty ? ["PATH": "/usr/bin:/bin"] : environment
        )
        let out = stdout + stderr
        if !allowFailure {
            try #require(status == 0, "\(argv[0]) exited \(status): \(out)")
        }
        return out
    }

    private func matches(of pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    private func binDirectory() -> String { (lanyardBinary() as NSString).deletingLastPathComponent }

    private func documentationFiles() throws -> [String] {
        let root = repositoryRoot.path
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }
            .sorted()
        let packaging = ["Packaging/debian/README.md", "Tests/Fixtures/oauth/README.md"].map { root + "/" + $0 }
            .filter { FileManager.default.fileExists(atPath: $0) }
        return [root + "/README.md"] + docs.map { root + "/docs/" + $0 } + packaging
    }
}

/// Finds `lanyard …` command lines in Markdown (shell code blocks and inline code) and checks them
/// against the command table.
enum DocExamples {
    /// Every example with its line number: the words after `lanyard`, up to the end of the command.
    static func extract(from markdown: String) -> [(Int, [String])] {
        var found: [(Int, [String])] = []
        var fence: String?  // the info string of the open fence, nil outside fences
        for (index, line) in markdown.components(separatedBy: "\n").enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") {
                fence = fence == nil ? String(trimmed.dropFirst(3)) : nil
                continue
            }
            let pieces: [String]
            if let fence, !line.contains("`") {
                // a shell block: the whole line up to a comment
                guard ["", "sh", "bash", "shell", "console", "zsh", "fish"].contains(fence) else { continue }
                pieces = [line.components(separatedBy: " #").first ?? line]
            } else {
                // prose (or a comment in a block) quoting commands in `code` spans
                let parts = line.components(separatedBy: "`")
                pieces = stride(from: 1, to: parts.count - 1, by: 2).map { parts[$0] }
            }
            for piece in pieces {
                for example in commands(in: piece) { found.append((index + 1, example)) }
            }
        }
        return found
    }

    /// The `lanyard` command lines in one line of shell.
    static func commands(in text: String) -> [[String]] {
        var results: [[String]] = []
        var search = text.startIndex
        while let range = text.range(of: "lanyard ", range: search..<text.endIndex) {
            search = range.upperBound
            if range.lowerBound > text.startIndex {
                let before = text[text.index(before: range.lowerBound)]
                guard before.isWhitespace || "(`\"'/=;|&".contains(before) else { continue }
            }
            var words: [String] = []
            for word in shellWords(String(text[range.upperBound...])) {
                if ["|", "||", "&&", ";", ">", ">>", "<", "…", "..."].contains(word) || word.hasPrefix("#")
                    || word.hasPrefix("2>")
                {
                    break
                }
                if let paren = word.firstIndex(of: ")") {
                    let head = String(word[..<paren])
                    if !head.isEmpty { words.append(head) }
                    break
                }
                words.append(word)
            }
            if let first = words.first, first.first?.isLowercase == true || first.hasPrefix("-") {
                results.append(words)
            }
        }
        return results
    }

    /// Splits on blanks, keeping quoted text together (quotes removed).
    static func shellWords(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for ch in text {
            if let q = quote {
                if ch == q { quote = nil } else { current.append(ch) }
            } else if ch == "\"" || ch == "'" {
                quote = ch
                inWord = true
            } else if ch.isWhitespace {
                if inWord {
                    words.append(current)
                    current = ""
                    inWord = false
                }
            } else {
                current.append(ch)
                inWord = true
            }
        }
        if inWord { words.append(current) }  // an unterminated quote ends with the text
        return words
    }

    /// nil when the command line is accepted. Usage synopses (`[SLOT]`, `a|b`, `…`) are checked
    /// word by word: each subcommand alternative must be a subcommand, and each flag a flag of
    /// (one of) the command(s) the synopsis names.
    static func check(_ words: [String]) -> String? {
        let isSynopsis = words.contains {
            $0.contains("[") || $0.contains("]") || $0.contains("|") || $0.contains("…") || $0.contains("<")
        }
        if !isSynopsis {
            do {
                _ = try Lanyard.parse(words)
                return nil
            } catch {
                // Prose names a command without its arguments (`lanyard logout`, `lanyard exec`) or
                // a group without its subcommand (`lanyard git-credential`).
                return error.message.hasPrefix("missing ") ? nil : error.message
            }
        }
        guard let name = words.first(where: { !$0.hasPrefix("-") }) else { return "no command" }
        if name.hasPrefix("<") { return nil }  // `lanyard <command> …`: the general form
        guard let spec = Lanyard.commands.first(where: { $0.name == name }) else { return "unknown command \(name)" }
        var specs = [spec]
        for word in words.drop(while: { $0 != name }).dropFirst() {
            let bare = word.trimmingCharacters(in: CharacterSet(charactersIn: "[]…,"))
            let alternatives = bare.split(separator: "|").map(String.init).filter { !$0.isEmpty }
            if specs.count == 1, specs[0].isGroup, !bare.hasPrefix("-"), !word.hasPrefix("[") {
                // The word after a group names its subcommand(s).
                if bare.isEmpty || bare.hasPrefix("<") { return nil }
                var named: [CommandSpec] = []
                for alternative in alternatives {
                    guard let sub = specs[0].subcommand(alternative) else {
                        return "`\(specs[0].name)` has no subcommand \(alternative)"
                    }
                    named.append(sub)
                }
                specs = named
                continue
            }
            for alternative in alternatives where alternative.hasPrefix("-") {
                let flag = alternative.split(separator: "=").first.map(String.init) ?? alternative
                let known = specs.contains {
                    $0.allFlags.contains { "--" + $0.name == flag || $0.short.map { "-\($0)" } == flag }
                }
                if !known && flag != "--" {
                    return "`\(specs.map(\.name).joined(separator: "|"))` has no option \(flag)"
                }
            }
        }
        return nil
    }

    /// The commands a docs/cli.md heading documents: each `lanyard …` synopsis in it names a
    /// command and, through its subcommand alternatives (`init|unlock`), those subcommands.
    static func commandsNamed(byHeading heading: String) -> [String] {
        var names: [String] = []
        let parts = heading.components(separatedBy: "`")
        for code in stride(from: 1, to: parts.count - 1, by: 2).map({ parts[$0] }) where code.hasPrefix("lanyard ") {
            let words = code.split(separator: " ").dropFirst().map(String.init)
            guard let first = words.first, let spec = Lanyard.commands.first(where: { $0.name == first }) else {
                continue
            }
            if !names.contains(spec.name) { names.append(spec.name) }
            guard spec.isGroup, let next = words.dropFirst().first else { continue }
            for word in next.split(separator: "|").map(String.init) {
                if let sub = spec.subcommand(word), !names.contains(sub.name) { names.append(sub.name) }
            }
        }
        return names
    }
}
