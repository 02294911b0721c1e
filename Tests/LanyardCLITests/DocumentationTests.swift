import Foundation
import LanyardTestSupport
import Testing
@testable import LanyardCLI
@testable import LanyardCore
@testable import LanyardStore

/// `--help`, the man page and the three completion scripts are generated from one table; these
/// tests read each of them the way a person or a shell would and check they agree, and that every
/// `lanyard …` example in README.md and docs/ is a command line the parser accepts.
@Suite struct DocumentationTests {
    /// Command name → its long flags, as one surface shows them.
    typealias Surface = [String: Set<String>]

    @Test func helpManPageAndCompletionsListTheSameCommandsAndFlags() throws {
        let help = try helpSurface()
        #expect(help.count >= 25, "help lists \(help.count) commands")
        #expect(help["refresh-worker"] == nil, "hidden commands stay out of help")
        let surfaces: [(String, Surface)] = [
            ("man page", try manPageSurface()),
            ("bash completion", try bashSurface()),
            ("fish completion", try fishSurface()),
            ("zsh completion", try zshSurface()),
        ]
        for (name, surface) in surfaces {
            #expect(surface.keys.sorted() == help.keys.sorted(), "\(name) lists other commands than --help")
            for (command, flags) in help {
                #expect(surface[command] == flags, "\(name): flags of `\(command)` differ from --help: \(surface[command]?.sorted() ?? []) vs \(flags.sorted())")
            }
        }
    }

    /// The completion scripts skip flag values with one list for every command, which is right
    /// only while each spelling takes a value everywhere or nowhere.
    @Test func eachFlagSpellingTakesAValueEverywhereOrNowhere() {
        var takesValue: [String: (Bool, String)] = [:]
        for spec in Lanyard.commands where !spec.hidden {
            for flag in spec.allFlags {
                for spelling in flag.spellings {
                    if let (seen, first) = takesValue[spelling] {
                        #expect(seen == (flag.value != nil), "\(spelling) takes a value in `\(first)` but not in `\(spec.name)`, or the reverse")
                    } else {
                        takesValue[spelling] = (flag.value != nil, spec.name)
                    }
                }
            }
        }
        #expect(Set(Completion.valueFlagSpellings) == Set(takesValue.filter { $0.value.0 }.keys))
    }

    @Test func completionsOfferSlotNamesFromTheRegistry() throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        try h.addSlot("personal")
        let env = h.environment.merging(["PATH": binDirectory() + ":/usr/bin:/bin"]) { $1 }
        let bash = try writeScript("bash")
        let bashOut = try runShell(["bash", "-c", """
            source \(bash)
            COMP_WORDS=(lanyard status ""); COMP_CWORD=2; _lanyard; echo "status: ${COMPREPLY[*]}"
            COMP_WORDS=(lanyard token --account p); COMP_CWORD=3; _lanyard; echo "account: ${COMPREPLY[*]}"
            COMP_WORDS=(lanyard store migrate ""); COMP_CWORD=3; _lanyard; echo "migrate: ${COMPREPLY[*]}"
            """], environment: env)
        #expect(bashOut.contains("status: personal work\n"), "\(bashOut)")
        #expect(bashOut.contains("account: personal\n"), "\(bashOut)")
        #expect(bashOut.contains("migrate: personal work\n"), "\(bashOut)")
        let fish = try writeScript("fish")
        let fishOut = try runShell(["fish", "--no-config", "-c", "source \(fish); complete -C 'lanyard switch '; complete -C 'lanyard status -a w'"],
                                   environment: env)
        let candidates = fishOut.split(separator: "\n").map { $0.split(separator: "\t").first.map(String.init) ?? "" }
        #expect(candidates.sorted() == ["personal", "work", "work"], "\(fishOut)")
    }

    @Test func listNamesPrintsOnlySlotNames() throws {
        let h = CLIHarness()
        try h.addSlot("work", active: true)
        try h.addSlot("personal")
        let r = h.run("list", "--names")
        #expect(r.status == 0)
        #expect(r.stdout == "personal\nwork\n")
    }

    @Test func manPageIsValidRoff() throws {
        let page = try writeTemp(CLIHarness().run("help", "--man").stdout, name: "lanyard.1")
        let lint = try runShell(["mandoc", "-T", "lint", "-W", "warning", page], environment: [:], allowFailure: true)
        #expect(lint.isEmpty, "mandoc -T lint: \(lint)")
        let rendered = try runShell(["man", "-l", "-P", "cat", page], environment: ["MANWIDTH": "80", "PATH": "/usr/bin:/bin"])
        for section in ["NAME", "SYNOPSIS", "COMMANDS", "ENVIRONMENT", "FILES", "EXIT STATUS"] {
            #expect(rendered.contains("\n\(section)\n"), "man page has no \(section) section")
        }
        for status in ExitStatus.allCases { #expect(rendered.contains("       \(status.rawValue) "), "exit status \(status.rawValue) missing") }
        for entry in Lanyard.environment { #expect(rendered.contains(entry.name)) }
    }

    @Test func cliReferenceDocumentsEveryEnvironmentVariableAndExitStatus() throws {
        let cli = try String(contentsOfFile: repositoryRoot.path + "/docs/cli.md", encoding: .utf8)
        let missingVariables = Lanyard.environment.map(\.name).filter { !cli.contains("| `\($0)` |") }
        #expect(missingVariables.isEmpty, "docs/cli.md does not document \(missingVariables)")
        let missingStatuses = ExitStatus.allCases.filter { !cli.contains("| \($0.rawValue) | \($0.meaning) |") }.map(\.rawValue)
        #expect(missingStatuses.isEmpty, "docs/cli.md's exit table differs for \(missingStatuses)")
        let missingCommands = Lanyard.commands.filter { !$0.hidden && !cli.contains("### `lanyard \($0.name)") }.map(\.name)
        #expect(missingCommands.isEmpty, "docs/cli.md has no section for \(missingCommands)")
    }

    @Test func everyLanyardExampleInTheDocsIsAcceptedByTheParser() throws {
        var checked = 0
        var failures: [String] = []
        for file in try documentationFiles() {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            for (line, example) in DocExamples.extract(from: text) {
                let where_ = "\(file.replacingOccurrences(of: repositoryRoot.path + "/", with: "")):\(line): lanyard \(example.joined(separator: " "))"
                if let problem = DocExamples.check(example) { failures.append("\(where_): \(problem)") } else { checked += 1 }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) examples are not accepted:\n\(failures.joined(separator: "\n"))")
        #expect(checked >= 80, "only \(checked) examples found: is the extraction broken?")
        print("documentation: \(checked) lanyard command lines accepted")
    }

    @Test func relativeLinksInTheDocsPointAtFiles() throws {
        var broken: [String] = []
        for file in try documentationFiles() {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            let folder = (file as NSString).deletingLastPathComponent
            for target in matches(of: #"\]\(([^)#\s]+)(?:#[^)]*)?\)"#, in: text) where !target.contains("://") && !target.hasPrefix("mailto:") {
                if !FileManager.default.fileExists(atPath: folder + "/" + target) { broken.append("\(file): \(target)") }
            }
        }
        #expect(broken.isEmpty, "links to missing files: \(broken)")
    }

    @Test func configurationExampleInTheCLIReferenceLoadsCleanly() throws {
        let cli = try String(contentsOfFile: repositoryRoot.path + "/docs/cli.md", encoding: .utf8)
        let example = try #require(cli.components(separatedBy: "```ini\n").dropFirst().first?.components(separatedBy: "```").first)
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

    @Test func exampleCheckerRejectsWhatTheParserRejects() {
        #expect(DocExamples.check(["lgin"]) != nil)
        #expect(DocExamples.check(["login", "--qrcode"]) != nil)
        #expect(DocExamples.check(["store", "unlok"]) != nil)
        #expect(DocExamples.check(["store", "init|unlock|lockk"]) != nil, "synopsis alternatives are checked one by one")
        #expect(DocExamples.check(["refresh", "[SLOT", "|", "--every]"]) != nil)
        #expect(DocExamples.check(["env", "--shell", "tcsh"]) != nil)
        #expect(DocExamples.check(["refresh", "[SLOT", "|", "--all]", "[--json]"]) == nil)
        #expect(DocExamples.check(["exec", "--account", "work", "--", "codex", "--model", "x"]) == nil)
        #expect(DocExamples.extract(from: "```sh\ncurl -H \"Authorization: Bearer $(lanyard token)\" …\n```\n").map(\.1) == [["token"]])
        #expect(DocExamples.extract(from: "Run `lanyard login work --qr` or `.build/debug/lanyard list | head`.\n").map(\.1)
                == [["login", "work", "--qr"], ["list"]])
    }

    // MARK: surfaces

    private func helpSurface() throws -> Surface {
        let h = CLIHarness()
        let overview = h.run("help").stdout
        let names = overview.split(separator: "\n", omittingEmptySubsequences: false).drop { $0 != "Commands:" }.dropFirst()
            .prefix { !$0.isEmpty }.compactMap { $0.split(separator: " ").first.map(String.init) }
        var surface: Surface = [:]
        for name in names {
            let text = h.run(name, "--help").stdout
            surface[name] = Set(matches(of: #"(?m)^  (?:-\w, |    )--([a-z-]+)"#, in: text))
            #expect(!surface[name]!.isEmpty, "`\(name) --help` lists no options")
        }
        return surface
    }

    private func manPageSurface() throws -> Surface {
        let page = CLIHarness().run("help", "--man").stdout.replacingOccurrences(of: "\\-", with: "-")
        let sections = page.components(separatedBy: "\n.SH ")
        let commands = try #require(sections.first { $0.hasPrefix("COMMANDS") })
        let options = try #require(sections.first { $0.hasPrefix("OPTIONS") })
        let global = Set(matches(of: #"\\fB--([a-z-]+)\\fR"#, in: options))
        var surface: Surface = [:]
        for block in commands.components(separatedBy: "\n.SS ").dropFirst() {
            let name = try #require(matches(of: #"^"lanyard ([a-z-]+)"#, in: block).first)
            let flags = block.components(separatedBy: "\n.TP\n").dropFirst().compactMap { matches(of: #"^(?:\\fB-\w\\fR, )?\\fB--([a-z-]+)\\fR"#, in: $0).first }
            surface[name] = Set(flags).union(global)
        }
        return surface
    }

    private func bashSurface() throws -> Surface {
        let script = try writeScript("bash")
        let out = try runShell(["bash", "-c", """
            source \(script)
            COMP_WORDS=(lanyard ""); COMP_CWORD=1; _lanyard
            for cmd in "${COMPREPLY[@]}"; do
                COMP_WORDS=(lanyard "$cmd" --); COMP_CWORD=2; _lanyard
                echo "$cmd ${COMPREPLY[*]}"
            done
            """], environment: ["PATH": "/usr/bin:/bin"])
        return surface(lines: out)
    }

    private func fishSurface() throws -> Surface {
        let script = try writeScript("fish")
        let out = try runShell(["fish", "--no-config", "-c", """
            source \(script)
            for cmd in (complete -C 'lanyard ' | string replace -r '\\t.*' '')
                echo $cmd (complete -C "lanyard $cmd --" | string replace -r '\\t.*' '')
            end
            """], environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        return surface(lines: out)
    }

    /// zsh completion needs an interactive shell to run; the script is syntax-checked by zsh and
    /// read for its command list and `_arguments` specs.
    private func zshSurface() throws -> Surface {
        let text = CLIHarness().run("completion", "zsh").stdout
        _ = try runShell(["zsh", "-n", try writeScript("zsh")], environment: [:])
        let commandList = try #require(text.components(separatedBy: "commands=(\n").dropFirst().first?.components(separatedBy: "\n  )").first)
        let names = matches(of: #"(?m)^    '([a-z-]+):"#, in: commandList)
        var surface: Surface = [:]
        let cases = "\n" + (try #require(text.components(separatedBy: "case $cmd in\n").dropFirst().first))
        for name in names {
            let branch = try #require(cases.components(separatedBy: "\n    \(name))\n").dropFirst().first?.components(separatedBy: " ;;").first,
                                      "no case for \(name)")
            surface[name] = Set(matches(of: #"(?:'|,)--([a-z-]+)(?:\[|\})"#, in: branch))
        }
        return surface
    }

    private func surface(lines: String) -> Surface {
        var surface: Surface = [:]
        for line in lines.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            guard let name = words.first else { continue }
            surface[name] = Set(words.dropFirst().filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) })
        }
        return surface
    }

    // MARK: helpers

    private func writeScript(_ shell: String) throws -> String {
        try writeTemp(CLIHarness().run("completion", shell).stdout, name: "lanyard.\(shell)")
    }

    private func writeTemp(_ text: String, name: String) throws -> String {
        let dir = NSTemporaryDirectory() + "lanyard-docs-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Runs a program (found by /usr/bin/env) and returns stdout then stderr; fails on a non-zero exit.
    private func runShell(_ argv: [String], environment: [String: String], allowFailure: Bool = false) throws -> String {
        let (status, stdout, stderr) = try runProcess("/usr/bin/env", argv, environment: environment.isEmpty ? ["PATH": "/usr/bin:/bin"] : environment)
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
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }.sorted()
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
                if ["|", "||", "&&", ";", ">", ">>", "<", "…", "..."].contains(word) || word.hasPrefix("#") || word.hasPrefix("2>") { break }
                if let paren = word.firstIndex(of: ")") {
                    let head = String(word[..<paren])
                    if !head.isEmpty { words.append(head) }
                    break
                }
                words.append(word)
            }
            if let first = words.first, first.first?.isLowercase == true || first.hasPrefix("-") { results.append(words) }
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
                if inWord { words.append(current); current = ""; inWord = false }
            } else {
                current.append(ch)
                inWord = true
            }
        }
        if inWord { words.append(current) }  // an unterminated quote ends with the text
        return words
    }

    /// nil when the command line is accepted. Usage synopses (`[SLOT]`, `a|b`, `…`) are checked
    /// word by word: each flag must exist and each subcommand alternative must be a subcommand.
    static func check(_ words: [String]) -> String? {
        let isSynopsis = words.contains { $0.contains("[") || $0.contains("]") || $0.contains("|") || $0.contains("…") || $0.contains("<") }
        if !isSynopsis {
            do {
                _ = try Lanyard.parse(words)
                return nil
            } catch {
                // Prose names a command without its arguments (`lanyard logout`, `lanyard exec`).
                return error.message.hasPrefix("missing argument") ? nil : error.message
            }
        }
        guard let name = words.first(where: { !$0.hasPrefix("-") }) else { return "no command" }
        if name.hasPrefix("<") { return nil }  // `lanyard <command> …`: the general form
        guard let spec = Lanyard.commands.first(where: { $0.name == name }) else { return "unknown command \(name)" }
        var positional = 0
        for word in words.drop(while: { $0 != name }).dropFirst() {
            let bare = word.trimmingCharacters(in: CharacterSet(charactersIn: "[]…,"))
            for alternative in bare.split(separator: "|").map(String.init) where !alternative.isEmpty {
                if alternative.hasPrefix("-") {
                    let flag = alternative.split(separator: "=").first.map(String.init) ?? alternative
                    let known = spec.allFlags.contains { "--" + $0.name == flag || $0.short.map { "-\($0)" } == flag }
                    if !known && flag != "--" { return "`\(spec.name)` has no option \(flag)" }
                } else if positional == 0, !spec.subcommands.isEmpty, alternative.lowercased() == alternative {
                    if !spec.subcommands.contains(alternative) { return "`\(spec.name)` has no subcommand \(alternative)" }
                }
            }
            if !bare.hasPrefix("-") && !word.hasPrefix("[-") && !bare.isEmpty { positional += 1 }
        }
        return nil
    }
}
