import Foundation
import LanyardCore
import LanyardFleet
import LanyardStore
import LanyardSupport
import Testing

/// `password-file` is read as LANYARD_PASSPHRASE_FILE is: one line ending (`\n` or `\r\n`) is not
/// part of the password; spaces are.
@Suite struct FleetConnectionTests {
    /// A private folder with `password` written in it, and settings that name it.
    func makeSettings(password: String?) throws -> (FleetSettings, folder: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "lanyard-fleet-password-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(
            atPath: folder,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        var settings = FleetSettings(name: "team", machine: "m1", endpoints: ["http://127.0.0.1:1"])
        settings.user = "fleet"
        settings.passwordFile = folder + "/password"
        if let password {
            #expect(
                FileManager.default.createFile(
                    atPath: folder + "/password",
                    contents: Data(password.utf8),
                    attributes: [.posixPermissions: 0o600]
                )
            )
        }
        return (settings, folder)
    }

    @Test(arguments: [
        ("  two  words \n", "  two  words "), ("  two  words \r\n", "  two  words "), ("\tpw\t", "\tpw\t"),
        ("pw\n\n", "pw"), ("pw \r\nsecond line\n", "pw "),
    ])
    func oneLineEndingIsNotPartOfThePasswordButSpacesAre(_ file: String, _ password: String) throws {
        let (settings, folder) = try makeSettings(password: file)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try FleetConnection.password(settings) == password)
    }

    @Test func anEmptyOrMissingPasswordFileIsAnErrorNamingTheFile() throws {
        for content in ["", "\n", "\r\n", nil] as [String?] {
            let (settings, folder) = try makeSettings(password: content)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            #expect {
                _ = try FleetConnection.password(settings)
            } throws: { error in
                guard case .unavailable(fleet: "team", _, let detail, _)? = error as? FleetError else { return false }
                return detail.contains(folder + "/password")
                    && detail.contains(content == nil ? "does not exist" : "empty password")
            }
        }
        let (named, folder) = try makeSettings(password: nil)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var none = named
        none.passwordFile = nil
        #expect(try FleetConnection.password(none) == nil)
    }

    /// End to end: etcd accepts the password with its spaces, as read from a file that ends with
    /// `\r\n`, through the client `FleetConnection.gateway` makes.
    @Test func etcdAcceptsAPasswordWithSpacesReadFromTheFile() throws {
        let server = try PrivateEtcd()
        let rootPassword = "root-\(UUID().uuidString)"
        let password = "  pass phrase \(UUID().uuidString)  "
        try server.administer("/v3/auth/user/add", #"{"name":"root","password":"\#(rootPassword)"}"#)
        try server.administer("/v3/auth/user/grant", #"{"user":"root","role":"root"}"#)
        try server.administer("/v3/auth/role/add", #"{"name":"fleet"}"#)
        try server.administer(
            "/v3/auth/role/grant",
            #"{"name":"fleet","perm":{"permType":"READWRITE","key":"\#(base64("/fleet/"))","#
                + #""range_end":"\#(base64("/fleet0"))"}}"#
        )
        try server.administer("/v3/auth/user/add", #"{"name":"fleet","password":"\#(password)"}"#)
        try server.administer("/v3/auth/user/grant", #"{"user":"fleet","role":"fleet"}"#)
        try server.administer("/v3/auth/enable", "{}")

        let (base, folder) = try makeSettings(password: password + "\r\n")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var settings = base
        settings.endpoints = [server.endpoint]
        let etcd = try FleetConnection.gateway(settings)
        _ = try etcd.put("/fleet/a", value: [7], lease: 0)
        #expect(try etcd.get("/fleet/a")?.value == [7])

        // The same password without its spaces (what trimming used to send) is refused.
        #expect(
            FileManager.default.createFile(
                atPath: folder + "/password",
                contents: Data((password.trimmingSpaces() + "\n").utf8),
                attributes: [.posixPermissions: 0o600]
            )
        )
        #expect {
            _ = try FleetConnection.gateway(settings).get("/fleet/a")
        } throws: { error in
            guard case .permissionDenied(let detail)? = error as? EtcdError else { return false }
            return detail.contains("refused the name or password of user fleet")
                && !detail.contains(password.trimmingSpaces())
        }
    }
}
