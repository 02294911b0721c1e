// Test-only tool: writes to Lanyard's stores from a separate process so tests can race two
// writers or kill -9 one mid-write. Uses the XDG variables of its environment.
//   lanyard-test-tool file-put PREFIX COUNT     put PREFIX-0 … PREFIX-(COUNT-1) into the file store
//   lanyard-test-tool file-rewrite SLOT COUNT   put SLOT COUNT times with a growing access token
//   lanyard-test-tool fleet-lock SLOT TTL       take SLOT's fleet lock (config.ini's [fleet]) with a
//                                               TTL-second lease, print "locked", hold it until killed
import Foundation
import LanyardCore
import LanyardFleet
import LanyardStore

func credential(_ token: String) -> Credential {
    Credential(
        provider: "openai",
        tokens: TokenSet(accessToken: token, refreshToken: "rt-" + token),
        lastRefresh: Date(),
        account: AccountInfo(email: "test@example.com")
    )
}

let args = CommandLine.arguments
guard args.count == 4, let count = Int(args[3]) else {
    FileHandle.standardError.write(Data("usage: lanyard-test-tool file-put|file-rewrite|fleet-lock NAME COUNT\n".utf8))
    exit(2)
}
let store = EncryptedFileStore(paths: Paths(environment: ProcessInfo.processInfo.environment))
do {
    switch args[1] {
    case "file-put":
        for i in 0..<count { try store.put(credential("\(args[2])-\(i)"), for: try Slot("\(args[2])-\(i)")) }
    case "file-rewrite":
        let slot = try Slot(args[2])
        for i in 0..<count {
            try store.put(credential("generation-\(i)"), for: slot)
            FileHandle.standardOutput.write(Data("\(i)\n".utf8))
        }
    case "fleet-lock":
        let paths = Paths(environment: ProcessInfo.processInfo.environment)
        guard let settings = try ConfigFile.load(path: paths.configFile).config.fleet else { exit(2) }
        let lock = try FleetLock.acquire(
            try FleetConnection.gateway(settings),
            folder: FleetKeys(fleet: settings.name).locks(try Slot(args[2])),
            ttl: Int64(count),
            timeout: 30
        )
        FileHandle.standardOutput.write(Data("locked \(lock.key)\n".utf8))
        while true { pause() }
    default:
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("lanyard-test-tool: \(error.localizedDescription)\n".utf8))
    exit(1)
}
