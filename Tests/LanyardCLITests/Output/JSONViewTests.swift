import Foundation
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth
@testable import LanyardCLI
@testable import LanyardIntegrations

/// Every `--json` document is a ``JSONView``; its `keys` are the schema docs/cli.md publishes.
/// These tests read each command's "JSON:" key list in docs/cli.md and check it against the view
/// both ways (keys, order, `?` for optional), and that rendered views have exactly those keys.
@Suite struct JSONViewTests {
    /// One documented document: the docs/cli.md section (the heading's command words, or a
    /// `##` title), the text after which its key list is the first `` `{…}` `` span, the view, and
    /// instances that between them show every key.
    struct Documented {
        let section: String
        var marker = "JSON"
        let view: any JSONView.Type
        let samples: [any JSONView]
    }

    /// Commands that take `--json` whose output is not (yet) a view, and why: the gap, visible.
    static let notConverted: [String: String] = [
        "ask": "JSON lines, one per stream event (documented event by event)",
        "env": "the variables themselves: the keys are the provider's variable names",
        "events": "each line is the event object stored in the log",
        "completion": "no JSON output",
        "exec": "no JSON output",
        "agent": "no JSON output",
        "kube-credential": "kubectl's ExecCredential (a foreign protocol)",
        "help": "no JSON output",
    ]

    static func documented() throws -> [Documented] {
        let slot = try Slot("work")
        let other = try Slot("home")
        let record = SlotRecord(
            provider: "openai",
            backend: .file,
            account: AccountInfo(email: "u@example.com"),
            state: .signedOut
        )
        var document = RegistryDocument()
        document.slots[slot] = record
        document.active = slot
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        let full = AccountInfo(
            email: "u@example.com",
            accountID: "acct",
            plan: Plan(rawValue: "pro"),
            isFedRAMPAccount: false
        )
        let doctor = DoctorReport(
            registryPath: "/r",
            slotCount: 0,
            backends: [],
            slots: [],
            unregisteredItems: [],
            pendingRecoveries: [],
            missingItems: []
        )
        let member = FleetMember(
            machine: "m1",
            recipient: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
            signingKey: "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
            addedAt: date,
            approvedBy: "m1"
        )
        let fleetReport = FleetStatusReport(
            fleet: "home",
            machine: "m1",
            endpoints: [],
            healthy: false,
            problem: "p",
            fingerprint: "9C1E-04B2-7D3A-55F0-E812",
            members: [member],
            pending: [],
            slots: [],
            damaged: [],
            leader: "m1",
            standing: "unknown"
        )
        var forkedReport = fleetReport
        forkedReport.alarm = FleetStatusReport.Alarm(
            FleetAlarm(
                fleet: "home",
                kind: .forked,
                seq: 4,
                digest: String(repeating: "ab", count: 32),
                ours: String(repeating: "cd", count: 32),
                source: "/lanyard/home/log/0000000004",
                signer: "m3",
                detectedAt: date
            )
        )
        forkedReport.removedAccess = [
            FleetStatusReport.RemovedAccess(
                machine: "m3",
                access: .notRevoked(user: "lanyard-m3", commands: ["etcdctl user delete lanyard-m3"])
            )
        ]
        let codex = CodexFollow(authPath: "/c/auth.json", copiedBack: false, runningCodexPIDs: [])
        return [
            Documented(
                section: "Output",
                marker: "Errors are printed",
                view: ErrorView.self,
                samples: [ErrorView(code: .usage, message: "m")]
            ),
            Documented(
                section: "login",
                view: LoginView.self,
                samples: [
                    LoginView(slot: slot, provider: "openai", account: AccountInfo(), expiresAt: nil),
                    LoginView(slot: slot, provider: "openai", account: full, expiresAt: date),
                    LoginView(slot: slot, provider: "openai", account: full, expiresAt: date, insteadOf: slot),
                ]
            ),
            Documented(
                section: "logout",
                view: LogoutView.self,
                samples: [
                    LogoutView(slot: slot, revoked: false), LogoutView(slot: slot, revoked: false, notRevoked: "r"),
                ]
            ),
            Documented(
                section: "token",
                view: TokenView.self,
                samples: [
                    TokenView(slot: slot, accessToken: "t", expiresAt: nil),
                    TokenView(slot: slot, accessToken: "t", expiresAt: date),
                ]
            ),
            Documented(
                section: "refresh",
                view: RefreshView.self,
                samples: [RefreshView(results: [.refreshed(slot, expiresAt: date)])]
            ),
            Documented(section: "netrc", view: NetrcView.self, samples: [NetrcView(machines: [], unmapped: ["h"])]),
            Documented(section: "gh import", view: GhImportView.self, samples: [GhImportView(slots: [])]),
            Documented(
                section: "export",
                view: ExportView.self,
                samples: [ExportView(file: "/f", slots: ["work"], skipped: [], encryption: "x25519")]
            ),
            Documented(
                section: "import",
                view: ImportView.self,
                samples: [ImportView(file: "/f", exportedAt: date, slots: [])]
            ),
            Documented(section: "usage", view: UsageView.self, samples: [UsageView(slots: [])]),
            Documented(
                section: "doctor",
                view: DoctorView.self,
                samples: [DoctorView(report: doctor), DoctorView(report: doctor, fleet: fleetReport)]
            ),
            Documented(
                section: "fleet init",
                view: FleetMemberView.self,
                samples: [
                    FleetMemberView(member: member),
                    FleetMemberView(member: member, fleetFingerprint: "9C1E-04B2-7D3A-55F0-E812"),
                ]
            ),
            Documented(
                section: "fleet join",
                view: FleetMemberView.self,
                samples: [
                    FleetMemberView(member: member),
                    FleetMemberView(member: member, fleetFingerprint: "9C1E-04B2-7D3A-55F0-E812"),
                ]
            ),
            Documented(
                section: "fleet approve",
                view: FleetApproveView.self,
                samples: [FleetApproveView(member: member, slots: [slot])]
            ),
            Documented(
                section: "fleet share",
                view: FleetSlotView.self,
                samples: [FleetSlotView(slot: slot, shared: true)]
            ),
            Documented(
                section: "fleet unshare",
                view: FleetSlotView.self,
                samples: [FleetSlotView(slot: slot, shared: false)]
            ),
            Documented(
                section: "fleet sync",
                view: FleetSyncView.self,
                samples: [FleetSyncView(results: [(slot, .adopted, nil)])]
            ),
            Documented(
                section: "fleet status",
                view: FleetStatusView.self,
                samples: [FleetStatusView(report: fleetReport), FleetStatusView(report: forkedReport)]
            ),
            Documented(
                section: "fleet resolve",
                view: FleetStatusView.self,
                samples: [FleetStatusView(report: fleetReport), FleetStatusView(report: forkedReport)]
            ),
            Documented(
                section: "fleet remove",
                view: FleetRemoveView.self,
                samples: [
                    FleetRemoveView(
                        removal: FleetRemoval(
                            machine: "m2",
                            wasMember: true,
                            slots: [
                                FleetRemoval.SlotOutcome(slot: slot, result: .rotated(generation: 4))
                            ],
                            etcdAccess: .revoked(user: "lanyard-m2")
                        )
                    )
                ]
            ),
            Documented(
                section: "store init",
                view: StoreInitView.self,
                samples: [
                    StoreInitView(
                        store: "/s",
                        passphrase: true,
                        unlocked: true,
                        tpm: false,
                        recovery: [],
                        recoveryFile: nil
                    ),
                    StoreInitView(
                        store: "/s",
                        passphrase: false,
                        unlocked: true,
                        tpm: true,
                        recovery: ["age1…"],
                        recoveryFile: "/r"
                    ),
                ]
            ),
            Documented(
                section: "store seal",
                view: StoreSealView.self,
                samples: [
                    StoreSealView(store: "/s", outcome: "sealed", pin: true, recovery: ["age1…"], recoveryFile: "/r"),
                    StoreSealView(store: "/s", outcome: "finished", pin: false, recovery: [], recoveryFile: nil),
                ]
            ),
            Documented(
                section: "store unlock",
                view: StoreUnlockView.self,
                samples: [StoreUnlockView.unlocked(cacheSeconds: 60), .noPassphrase]
            ),
            Documented(section: "store lock", view: StoreLockView.self, samples: [StoreLockView(wasUnlocked: true)]),
            Documented(
                section: "store status",
                view: StoreStatusView.self,
                samples: [
                    StoreStatusView(
                        store: "/s",
                        initialized: true,
                        passphrase: true,
                        tpm: false,
                        locked: false,
                        problem: nil
                    ),
                    StoreStatusView(
                        store: "/s",
                        initialized: true,
                        passphrase: false,
                        tpm: true,
                        locked: true,
                        problem: "p"
                    ),
                ]
            ),
            Documented(section: "store migrate", view: StoreMigrateView.self, samples: [StoreMigrateView(steps: [])]),
            Documented(section: "list", view: ListView.self, samples: [ListView(document: document)]),
            Documented(
                section: "list",
                marker: "with `--json`,",
                view: ListNamesView.self,
                samples: [ListNamesView(names: [slot])]
            ),
            Documented(
                section: "status",
                view: StatusView.self,
                samples: [
                    StatusView(
                        summary: SlotSummaryView(slot: slot, record: record, active: true),
                        chosenBy: nil,
                        autoSwitch: AutoSwitchPolicy(),
                        lastSwitch: nil,
                        blocked: nil
                    )
                ]
            ),
            Documented(
                section: "switch",
                view: SwitchView.self,
                samples: [
                    SwitchView(active: slot, previous: nil, candidates: [], codex: nil, codexStillUses: nil),
                    SwitchView(
                        active: slot,
                        previous: other,
                        candidates: [.null],
                        codex: codex,
                        codexStillUses: "home"
                    ),
                ]
            ),
            Documented(
                section: "codex export",
                view: CodexExportView.self,
                samples: [
                    CodexExportView(slot: slot, authJSON: "/a", keyringItem: nil, accountID: nil),
                    CodexExportView(slot: slot, authJSON: nil, keyringItem: "Codex's keyring item", accountID: "acct"),
                ]
            ),
            Documented(
                section: "codex import",
                view: CodexImportView.self,
                samples: [CodexImportView(slot: slot, email: nil, backend: .file)]
            ),
            Documented(
                section: "which",
                view: WhichView.self,
                samples: [
                    WhichView(slot: slot, rule: "active", path: nil, exists: true),
                    WhichView(slot: slot, rule: "pin-file", path: "/p", exists: true),
                ]
            ),
            Documented(section: "pin", view: PinView.self, samples: [PinView(slot: slot, path: "/p/.lanyard")]),
            Documented(
                section: "unpin",
                view: UnpinView.self,
                samples: [
                    UnpinView(removed: true, stillPinnedBy: nil), UnpinView(removed: true, stillPinnedBy: "/.lanyard"),
                ]
            ),
            Documented(
                section: "rename",
                view: RenameView.self,
                samples: [RenameView(from: slot, to: other, stalePins: [])]
            ),
            Documented(section: "remove", view: RemoveView.self, samples: [RemoveView(removed: slot)]),
            Documented(section: "version", view: VersionView.self, samples: [VersionView(version: "1")]),
        ]
    }

    /// The lines of docs/cli.md under the heading for `section` (`### \`lanyard list …`, or
    /// `## Output`), up to the next heading.
    static func sectionText(_ section: String, in cli: String) -> String? {
        var lines: [Substring] = []
        var inside = false
        for line in cli.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") {
                if inside { break }
                inside =
                    line.contains("`lanyard \(section) ") || line.contains("`lanyard \(section)`")
                    || line == "## \(section)"
                continue
            }
            if inside { lines.append(line) }
        }
        return inside ? lines.joined(separator: "\n") : nil
    }

    /// The top-level keys of a documented object such as `{"slot", "path"?, "slots": [{…}]}`, in
    /// order, with whether each is marked optional; `SUMMARY…` stands for the slot summary's keys.
    static func topLevelKeys(_ span: String) -> [(key: String, optional: Bool)] {
        var keys: [(key: String, optional: Bool)] = []
        let chars = Array(span)
        var depth = 0
        var expectKey = false
        var i = 0
        while i < chars.count {
            let c = chars[i]
            switch c {
            case "{", "[":
                depth += 1
                expectKey = depth == 1
            case "}", "]":
                depth -= 1
            case "," where depth == 1:
                expectKey = true
            case "\"":
                var j = i + 1
                while j < chars.count && chars[j] != "\"" { j += 1 }
                if depth == 1 && expectKey {
                    keys.append((String(chars[(i + 1)..<j]), j + 1 < chars.count && chars[j + 1] == "?"))
                    expectKey = false
                }
                i = j
            case "S" where depth == 1 && expectKey && String(chars[i...]).hasPrefix("SUMMARY"):
                keys += SlotSummaryView.keys.map { ($0, false) }
                expectKey = false
            default:
                break
            }
            i += 1
        }
        return keys
    }

    /// The first `` `{…}` `` span after `marker` in the section.
    static func documentedSpan(_ entry: Documented, in cli: String) -> String? {
        guard let text = sectionText(entry.section, in: cli), let marker = text.range(of: entry.marker),
            let open = text.range(of: "`{", range: marker.lowerBound..<text.endIndex),
            let close = text.range(of: "`", range: text.index(after: open.lowerBound)..<text.endIndex)
        else { return nil }
        return String(text[text.index(after: open.lowerBound)..<close.lowerBound])
    }

    @Test func docsListEachViewsKeysInOrderWithTheOptionalOnesMarked() throws {
        let cli = try String(contentsOfFile: repositoryRoot.path + "/docs/cli.md", encoding: .utf8)
        for entry in try Self.documented() {
            let name = "\(entry.section) (\(entry.view))"
            guard let span = Self.documentedSpan(entry, in: cli) else {
                Issue.record(
                    "docs/cli.md: no `{…}` key list after \"\(entry.marker)\" in the section for \(entry.section)"
                )
                continue
            }
            let documented = Self.topLevelKeys(span)
            #expect(
                documented.map(\.key) == entry.view.keys,
                "\(name): docs/cli.md lists \(documented.map(\.key)), the view \(entry.view.keys)"
            )
            #expect(
                Set(documented.filter(\.optional).map(\.key)) == entry.view.optionalKeys,
                """
                \(name): docs/cli.md marks \(documented.filter(\.optional).map(\.key)) optional, \
                the view \(entry.view.optionalKeys.sorted())
                """
            )
        }
    }

    @Test func renderedViewsHaveExactlyTheirKeys() throws {
        for entry in try Self.documented() {
            let required = Set(entry.view.keys).subtracting(entry.view.optionalKeys)
            #expect(
                entry.view.optionalKeys.isSubset(of: Set(entry.view.keys)),
                "\(entry.view): optional keys outside keys"
            )
            #expect(Set(entry.view.keys).count == entry.view.keys.count, "\(entry.view): a key twice")
            var seen = Set<String>()
            for sample in entry.samples {
                #expect(type(of: sample) == entry.view)
                guard let object = sample.json.object else {
                    Issue.record("\(entry.view): not an object")
                    continue
                }
                let keys = Set(object.keys)
                #expect(
                    keys.isSubset(of: Set(entry.view.keys)),
                    "\(entry.view) renders undocumented \(keys.subtracting(entry.view.keys).sorted())"
                )
                #expect(required.isSubset(of: keys), "\(entry.view) leaves out \(required.subtracting(keys).sorted())")
                seen.formUnion(keys)
            }
            #expect(
                seen == Set(entry.view.keys),
                "\(entry.view): no sample shows \(Set(entry.view.keys).subtracting(seen).sorted())"
            )
        }
    }

    /// Every command that takes `--json` has a view checked here, or is listed as not converted.
    @Test func everyJSONCommandHasAViewOrIsListedAsNotConverted() throws {
        let covered = Set(try Self.documented().map(\.section))
        var missing: [String] = []
        func visit(_ spec: CommandSpec) {
            if spec.subcommands.isEmpty {
                if spec.prints && !spec.hidden && !covered.contains(spec.name) && Self.notConverted[spec.name] == nil {
                    missing.append(spec.name)
                }
            }
            spec.subcommands.forEach(visit)
        }
        Lanyard.commands.forEach(visit)
        #expect(
            missing.isEmpty,
            "commands with --json but no JSONView (add one, or list it in notConverted): \(missing)"
        )
    }
}
