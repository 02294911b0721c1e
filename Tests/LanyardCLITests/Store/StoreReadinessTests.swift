import Foundation
import LanyardTestSupport
import Testing

/// Before a sign-in shows a code, and in `doctor`: a store that could not keep the credential is
/// found up front (a keyring without the collection Lanyard writes to, no backend at all), so no
/// approval is wasted and `doctor` never says "No problems found." about a machine where nothing
/// can be stored. Real processes: the keyring cases each run in a D-Bus session of their own.
@Suite struct StoreReadinessTests {
    /// A launcher that runs a command in a private D-Bus session whose gnome-keyring has no
    /// default collection: the daemon starts with an empty data folder (making a `login`
    /// collection, as a desktop login does), which is then deleted over D-Bus, leaving the
    /// `default` alias naming nothing, as on a machine where the bus started gnome-keyring without
    /// a login keyring. The bus and the daemon get SIGKILL when the command ends: both inherit the
    /// test runner's blocked signals, so SIGTERM would not end them. The bus's socket is made in the
    /// launcher's folder, which goes with them (the session default, /tmp, would keep one stale
    /// socket a run). Exit 97/98 when the keyring could not be set up.
    static let keyringWithoutDefaultCollection = [
        "/bin/sh", "-c",
        """
        dir=$(mktemp -d "${TMPDIR:-/tmp}/lanyard-bus.XXXXXX") || exit 97
        mkfifo "$dir/address"
        dbus-daemon --session --address="unix:dir=$dir" --nofork \
        --nopidfile --print-address=4 4>"$dir/address" >/dev/null 2>&1 &
        bus=$!
        read -r DBUS_SESSION_BUS_ADDRESS < "$dir/address"
        export DBUS_SESSION_BUS_ADDRESS
        printf %s "$LANYARD_TEST_KEYRING_PASSWORD" | gnome-keyring-daemon \
        --foreground --unlock --components=secrets >/dev/null 2>&1 &
        daemon=$!
        stop() { kill -KILL $daemon $bus; wait $daemon $bus 2>/dev/null; rm -rf "$dir"; }
        if ! gdbus wait --session --timeout 10 org.freedesktop.secrets; then stop; exit 97; fi
        if ! gdbus call --session --dest org.freedesktop.secrets \
        --object-path /org/freedesktop/secrets/collection/login \\
             --method org.freedesktop.Secret.Collection.Delete >/dev/null; then stop; exit 98; fi
        if gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \\
             --method org.freedesktop.Secret.Service.ReadAlias default | grep -q collection; then stop; exit 98; fi
        "$@"
        status=$?
        stop
        exit $status
        """, "keyring-without-default",
    ]

    static func run(_ home: TestHome, _ args: [String], inKeyringSession: Bool = true) throws -> TestHome.Output {
        var environment = ["LANYARD_TEST_KEYRING_PASSWORD": "readiness-test", "PATH": "/usr/bin:/bin"]
        if !inKeyringSession { environment["DBUS_SESSION_BUS_ADDRESS"] = "" }
        let result = try home.run(
            args,
            extraEnvironment: environment,
            launcher: inKeyringSession ? keyringWithoutDefaultCollection : []
        )
        try #require(
            result.status != 97 && result.status != 98,
            "the private keyring could not be set up: \(result.stderr)"
        )
        return result
    }

    static func problems(_ doctor: TestHome.Output) -> [String] {
        ((try? JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8))) as? [String: Any])?["problems"]
            as? [String] ?? []
    }

    /// gnome-keyring with no default collection: `doctor` reports it, and `login` refuses before a
    /// code is requested (it used to show the code and fail only after the approval, exit 5).
    @Test func aKeyringWithoutADefaultCollectionIsFoundBeforeTheCode() async throws {
        let emulator = try OAuthTestServer(.chatgptEmulator)
        let home = TestHome()
        // Without the check, login would show a code and wait: the time limit ends that wait at once.
        let config = "[provider.openai]\nissuer = \(emulator.baseURL.absoluteString)\n[login]\ntimeout = 1\n"
        try home.writeConfig(config)

        let doctor = try Self.run(home, ["doctor", "--json"])
        #expect(doctor.status == 1, "\(doctor.stdout)\(doctor.stderr)")
        let problem = try #require(Self.problems(doctor).first, "\(doctor.stdout)")
        #expect(problem.hasPrefix("new sign-ins cannot be stored: "), "\(problem)")
        #expect(
            problem.contains("`lanyard store init`")
                && problem.contains("see the Secret Service backend entry for why and what to do"),
            "the keyring's explanation is in its backend entry, not repeated: \(problem)"
        )
        let human = try Self.run(home, ["doctor"])
        #expect(
            human.stdout.contains(
                "Secret Service  answers, but the keyring has no collection named by the default alias"
            ),
            "\(human.stdout)"
        )
        #expect(
            human.stdout.components(separatedBy: "no collection named by the default alias").count == 2,
            "said once: \(human.stdout)"
        )
        #expect(!human.stdout.contains("No problems found."))

        // `backend = auto` (the default): neither the keyring nor a file store can take it.
        let auto = try Self.run(home, ["login", "work"])
        #expect(auto.status == 5, "\(auto.stderr)")
        #expect(
            auto.stderr.contains(
                "lanyard: encrypted file is unavailable: there is no file store yet, "
                    + "and the Secret Service cannot keep credentials either"
            ),
            "\(auto.stderr)"
        )
        #expect(
            auto.stderr.contains("`lanyard store init`")
                && auto.stderr.contains("no collection named by the default alias")
        )
        #expect(!auto.stderr.contains("enter the code"))

        // `backend = secret-service`: the keyring's own error, before the code.
        try home.writeConfig(config + "[store]\nbackend = secret-service\n")
        let keyring = try Self.run(home, ["login", "work", "--json"])
        #expect(keyring.status == 5, "\(keyring.stdout)\(keyring.stderr)")
        let error =
            ((try? JSONSerialization.jsonObject(with: Data(keyring.stdout.utf8))) as? [String: Any])?["error"]
            as? [String: Any]
        #expect(error?["code"] as? String == "store_unavailable")
        #expect(
            (error?["message"] as? String)?.hasPrefix(
                "Secret Service is unavailable: the keyring has no collection named by the default alias"
            ) == true,
            "\(keyring.stdout)"
        )
        #expect(try await emulator.stat("requests.usercode") == 0, "no code was requested")

        // With a file store, `auto` signs in there; doctor still names the keyring's missing collection.
        try home.writeConfig(config)
        #expect(try home.run("store", "init", "--no-passphrase").status == 0)
        let withFile = try Self.run(home, ["doctor", "--json"])
        #expect(withFile.status == 1)
        #expect(
            Self.problems(withFile) == [
                "Secret Service answers but cannot keep credentials: see the Secret Service backend entry for why "
                    + "and what to do (new sign-ins go to the encrypted file meanwhile)"
            ],
            "\(withFile.stdout)"
        )
        #expect(
            withFile.stdout.contains("the keyring has no collection named by the default alias; create one"),
            "the entry says it: \(withFile.stdout)"
        )
    }

    /// No session bus and no file store: nothing can keep a sign-in. `doctor` says so, with the
    /// command that fixes it (it used to list both backends as not reachable and find no problem).
    @Test func noUsableBackendIsAProblem() throws {
        let home = TestHome()
        #expect(!FileManager.default.fileExists(atPath: home.root + "/run/bus"))
        let doctor = try Self.run(home, ["doctor"], inKeyringSession: false)
        #expect(doctor.status == 1, "\(doctor.stdout)")
        #expect(!doctor.stdout.contains("No problems found."))
        #expect(
            doctor.stdout.contains(
                "problem: new sign-ins cannot be stored: encrypted file is unavailable: there is no file store yet, "
                    + "and the Secret Service cannot keep credentials either. "
                    + "Create the file store with `lanyard store init`"
            ),
            "\(doctor.stdout)"
        )
        // The long explanation of the missing bus is printed once: in the keyring's entry.
        #expect(
            doctor.stdout.components(separatedBy: "Run Lanyard inside a desktop session").count == 2,
            "\(doctor.stdout)"
        )

        #expect(try home.run("store", "init", "--no-passphrase").status == 0)
        let fixed = try Self.run(home, ["doctor"], inKeyringSession: false)
        #expect(fixed.status == 0, "\(fixed.stdout)")
        #expect(fixed.stdout.contains("No problems found."))
        // Once the file store exists nothing advises creating it.
        #expect(!fixed.stdout.contains("store init"), "\(fixed.stdout)")
        #expect(fixed.stdout.contains("or use the encrypted file store, which is set up"), "\(fixed.stdout)")
    }
}
