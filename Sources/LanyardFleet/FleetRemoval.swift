import FoundationEssentials
import LanyardCore
import LanyardStore
import LanyardSupport

/// Whether a removed machine can still reach the fleet's etcd. Its signatures stop counting the
/// moment the removal entry is written, but with etcd access it can still delete and put back
/// data (denial of service, and hiding the removal from members that have not read it yet), so
/// `fleet remove` takes that access away where this machine's credentials may.
public enum EtcdAccessStatus: Sendable, Equatable {
    /// The machine's etcd user was deleted (or is gone).
    case revoked(user: String)
    /// Its etcd user still exists: `commands` take it away (run with etcd's root user).
    case notRevoked(user: String, commands: [String])
    /// It cannot be checked from here (`reason`): no etcd user is known for it (client
    /// certificates only), or this machine's credentials may not manage or read users.
    case unknown(user: String?, reason: String, commands: [String])

    /// Whether the removed machine's etcd access is known to be gone.
    public var isRevoked: Bool { if case .revoked = self { return true } else { return false } }
}

/// Machines this machine removed whose etcd access was not (known to be) revoked, in
/// `$XDG_DATA_HOME/lanyard/fleet/removed.json`: `fleet status` checks each again until its user
/// is gone.
package struct RemovedMachine: Equatable, Sendable {
    package var fleet: String
    package var machine: String
    package var etcdUser: String?

    static func path(_ paths: Paths) -> String { SharedSlotState.folder(paths) + "/removed.json" }

    package static func load(_ paths: Paths) -> [RemovedMachine] {
        guard let data = (try? SecureFiles.read(path(paths))) ?? nil, let value = try? JSONValue.parse(data),
            case .array(let items) = value
        else { return [] }
        return items.compactMap { item in
            guard let f = try? JSONFields(item), let fleet = try? f.string("fleet"),
                let machine = try? f.string("machine")
            else { return nil }
            return RemovedMachine(fleet: fleet, machine: machine, etcdUser: (try? f.optionalString("etcd_user")) ?? nil)
        }
    }

    package static func save(_ list: [RemovedMachine], paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(SharedSlotState.folder(paths))
        if list.isEmpty {
            if (try? SecureFiles.read(path(paths))) != nil { try SecureFiles.removeDurably(path(paths)) }
            return
        }
        let doc = JSONValue.array(
            list.map {
                .object([
                    "fleet": .string($0.fleet), "machine": .string($0.machine), "etcd_user": .optional($0.etcdUser),
                ]).droppingNulls
            }
        )
        try SecureFiles.atomicWrite(Data(doc.serialized().utf8), to: path(paths))
    }
}

extension Fleet {
    /// The `etcdctl` commands that take `member`'s etcd access away, for a person with the root user.
    func revocationCommands(_ member: FleetMember) -> [String] {
        let endpoints = settings.endpoints.joined(separator: ",")
        var commands: [String] = []
        if let user = member.etcdUser {
            commands.append("etcdctl --endpoints \(endpoints) --user root user delete \(Self.singleQuoted(user))")
        }
        commands.append(
            "# and stop trusting its client certificate "
                + "(a CRL with --client-crl-file, or re-issue the others from a new CA)"
        )
        return commands
    }

    /// `text` for a POSIX shell, inside single quotes.
    static func singleQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// Deletes the removed `member`'s etcd user when this machine's credentials may (etcd's root
    /// role), and otherwise records it so that `fleet status` keeps saying its access is open.
    package func revokeEtcdAccess(of member: FleetMember) -> EtcdAccessStatus {
        let status: EtcdAccessStatus
        if let user = member.etcdUser, let users = kv as? any EtcdUsers {
            do {
                try users.deleteUser(user)
                status = .revoked(user: user)
            } catch {
                status = .unknown(
                    user: user,
                    reason: "this machine's etcd credentials may not delete users (\(error.userFacingDescription))",
                    commands: revocationCommands(member)
                )
            }
        } else {
            status = .unknown(
                user: nil,
                reason: "no etcd user is known for \(member.machine) (it joined without [fleet] user): it reaches etcd "
                    + "with its client certificate",
                commands: revocationCommands(member)
            )
        }
        if !status.isRevoked {
            var list = RemovedMachine.load(paths).filter { !($0.fleet == name && $0.machine == member.machine) }
            list.append(RemovedMachine(fleet: name, machine: member.machine, etcdUser: member.etcdUser))
            try? RemovedMachine.save(list, paths: paths)
        }
        return status
    }

    /// The etcd access of each machine this machine removed and could not (or did not know how
    /// to) revoke, checked again: a user found gone is dropped from the list.
    package func removedMachinesAccess() -> [(machine: String, access: EtcdAccessStatus)] {
        var list = RemovedMachine.load(paths)
        var report: [(String, EtcdAccessStatus)] = []
        for removed in list where removed.fleet == name {
            let member = FleetMember(
                machine: removed.machine,
                recipient: "",
                signingKey: "",
                addedAt: nil,
                approvedBy: nil
            )
            var withUser = member
            withUser.etcdUser = removed.etcdUser
            guard let user = removed.etcdUser else {
                report.append(
                    (
                        removed.machine,
                        .unknown(
                            user: nil,
                            reason: "no etcd user is known for it: it reaches etcd with its client certificate",
                            commands: revocationCommands(withUser)
                        )
                    )
                )
                continue
            }
            guard let users = kv as? any EtcdUsers else { continue }
            do {
                if try users.userExists(user) {
                    report.append((removed.machine, .notRevoked(user: user, commands: revocationCommands(withUser))))
                } else {
                    list.removeAll { $0 == removed }
                }
            } catch {
                report.append(
                    (
                        removed.machine,
                        .unknown(
                            user: user,
                            reason: "this machine's etcd credentials may not read users, so it cannot be checked "
                                + "(\(error.userFacingDescription))",
                            commands: revocationCommands(withUser)
                        )
                    )
                )
            }
        }
        try? RemovedMachine.save(list, paths: paths)
        return report
    }
}

/// The slots `fleet remove` is rotating, in `$XDG_DATA_HOME/lanyard/fleet/rotating.json`: a
/// removal rotates every shared slot at once, so a member refuses to refresh from a value sealed
/// before a removal it verified (a value put back, or a rotation that failed); the remover's own
/// rotation, which starts from exactly such a value, is allowed by this note (the refresh may run
/// in a worker process, hence a file). Written before the rotations, removed after them.
package enum RotationNote {
    static func path(_ paths: Paths) -> String { SharedSlotState.folder(paths) + "/rotating.json" }

    /// Notes that the removal entry `seq` is being rotated away from.
    package static func begin(removal seq: Int64, fleet: String, paths: Paths) throws {
        try SecureFiles.ensureDirectory(paths.dataDirectory)
        try SecureFiles.ensureDirectory(SharedSlotState.folder(paths))
        let doc = JSONValue.object(["fleet": .string(fleet), "removal": .string(String(seq))])
        try SecureFiles.atomicWrite(Data(doc.serialized().utf8), to: path(paths))
    }

    package static func end(paths: Paths) {
        if (try? SecureFiles.read(path(paths))) != nil { try? SecureFiles.removeDurably(path(paths)) }
    }

    /// Whether this machine is rotating away from removal entry `seq` of `fleet`.
    package static func allows(removal seq: Int64, fleet: String, paths: Paths) -> Bool {
        guard let data = (try? SecureFiles.read(path(paths))) ?? nil, let f = try? JSONFields(try JSONValue.parse(data))
        else { return false }
        return (try? f.string("fleet")) == fleet && (try? f.counter("removal")).map { $0 >= seq } == true
    }
}
