// swift-tools-version:6.0
// Lanyard: multi-account credential and session manager for Linux.
// Layers (each depends only on those below): see docs/architecture.md.
import PackageDescription

let package = Package(
    name: "Lanyard",
    products: [
        .executable(name: "lanyard", targets: ["lanyard"]),
        .library(name: "LanyardKit", targets: ["LanyardKit"]),
        .library(name: "Age", targets: ["Age"]),
    ],
    targets: [
        // C libraries from Debian, through pkg-config. Module maps only; Swift wrappers live in
        // the layer that uses them (GLib's and GIO's all in LanyardGLib).
        // GLib and GIO headers (GIO's live in GLib's folder) and the part of libsecret's API Lanyard
        // uses (lanyard-secret.h). Nothing is linked at start-up: CLazyLibraries loads them on
        // first use (the Makefile's --as-needed drops the -lglib-2.0 that pkg-config adds).
        .systemLibrary(
            name: "CLibsecret",
            pkgConfig: "glib-2.0",
            providers: [.apt(["libsecret-1-dev", "libglib2.0-dev"])]
        ),
        // Declarations only (the headers are in /usr/include; nothing is linked): CLazyLibraries
        // loads libsodium and libkeyutils on first use.
        .systemLibrary(name: "CSodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CKeyutils", providers: [.apt(["libkeyutils-dev"])]),
        // Declarations only (qrencode.h is in /usr/include; no pkgConfig, so nothing is linked):
        // LanyardCLI's QRCode loads libqrencode with dlopen when `login --qr` draws a code.
        .systemLibrary(name: "CQrencode", providers: [.apt(["libqrencode-dev"])]),

        // The one way a C library is loaded on first use (Sources/CLazyLoading/include/lanyard_lazy.h),
        // which every C target below that calls a library uses.
        .target(name: "CLazyLoading"),
        // Loads GLib, libsecret (with GIO and GObject), libsodium and libkeyutils on first use, so a
        // command pays only for the libraries it calls.
        .target(name: "CLazyLibraries", dependencies: ["CLibsecret", "CSodium", "CKeyutils", "CLazyLoading"]),

        // Every GLib and GIO call (errors, key files, durable writes, GDBus, deadlines) behind a
        // Swift API; libsecret's own calls stay in LanyardStore's SecretServiceLibsecret.swift.
        // A blocking WebSocket client over libwebsockets (headers from libwebsockets-dev), loaded with
        // dlopen when a stream first opens a WebSocket, so no binary links it.
        .target(name: "CWebSocket", dependencies: ["CLazyLoading"]),
        // One blocking HTTP POST over libcurl (headers from libcurl4-openssl-dev), loaded with dlopen
        // when LanyardFleet first talks to etcd, so no binary links it.
        .target(name: "CCurl", dependencies: ["CLazyLoading"]),
        // Sealing and unsealing the file store's identity with a TPM 2.0 over libtss2 (headers from
        // libtss2-dev), loaded with dlopen when a TPM-sealed store is first opened, so no binary links it.
        .target(name: "CTPM", dependencies: ["CLazyLoading"]),

        // `lanyard tray`'s StatusNotifierItem and dbusmenu, and desktop notifications with actions, on
        // GDBus, each on a GLib main loop of a thread of its own (C: GDBus' server side is callbacks and
        // vtables). LanyardDesktop's Bus/ wraps it.
        .target(name: "CStatusNotifier", dependencies: ["CLibsecret", "CLazyLibraries"]),

        .target(name: "LanyardGLib", dependencies: ["CLibsecret", "CLazyLibraries"]),

        // prctl(2), which Swift cannot call (variadic): ProcessHardening's one call.
        .target(name: "CProcessControl"),

        // OS plumbing, package-only: spawning processes, process hardening, inotify, errno errors
        // and EINTR-safe calls, so the layers above do not each wrap them again.
        .target(name: "LanyardSystem", dependencies: ["LanyardSupport", "CProcessControl"]),

        // Support code, package-only: the JSON reader and writer, text rules and helpers, the
        // start-up trace, locks. LanyardCore's vocabulary is written with it.
        .target(name: "LanyardSupport"),
        .target(name: "LanyardCore", dependencies: ["LanyardSupport"]),
        .target(name: "Age", dependencies: ["CSodium", "CLazyLibraries"]),
        .target(
            name: "LanyardStore",
            dependencies: [
                "LanyardSupport", "LanyardCore", "LanyardSystem", "Age", "LanyardGLib", "CLibsecret", "CKeyutils",
                "CLazyLibraries", "CTPM",
            ]
        ),
        // A fleet of machines sharing slots through etcd (the v3 JSON gateway over libcurl).
        .target(name: "LanyardFleet", dependencies: ["LanyardSupport", "LanyardCore", "LanyardStore", "Age", "CCurl"]),
        .target(
            name: "LanyardAuth",
            dependencies: ["LanyardSupport", "LanyardCore", "LanyardStore", "LanyardFleet", "Age"]
        ),
        .target(
            name: "LanyardIntegrations",
            dependencies: ["LanyardSupport", "LanyardCore", "LanyardSystem", "LanyardStore", "LanyardAuth", "Age"]
        ),
        // The desktop: `lanyard tray` (its model, usage alerts, the service, autostart, one tray per
        // session) and desktop notifications, with their GDBus wrappers over CStatusNotifier.
        .target(
            name: "LanyardDesktop",
            dependencies: [
                "LanyardSupport", "LanyardCore", "LanyardSystem", "LanyardStore", "LanyardAuth", "LanyardIntegrations",
                "LanyardGLib", "CStatusNotifier",
            ]
        ),
        .target(
            name: "LanyardAgent",
            dependencies: [
                "LanyardSupport", "LanyardCore", "LanyardSystem", "LanyardStore", "LanyardAuth", "LanyardFleet",
                "LanyardIntegrations", "LanyardDesktop",
            ]
        ),
        .target(
            name: "LanyardNetwork",
            dependencies: ["LanyardSupport", "LanyardCore", "LanyardStore", "LanyardAuth", "CWebSocket", "CCurl"]
        ),
        .target(
            name: "LanyardKit",
            dependencies: [
                "LanyardSupport", "LanyardCore", "LanyardStore", "LanyardAuth", "LanyardFleet", "LanyardIntegrations",
                "LanyardNetwork",
            ]
        ),
        .target(
            name: "LanyardCLI",
            dependencies: [
                "LanyardSupport", "LanyardCore", "LanyardSystem", "Age", "LanyardStore", "LanyardAuth", "LanyardFleet",
                "LanyardIntegrations", "LanyardDesktop", "LanyardAgent", "CQrencode",
            ]
        ),
        // `lanyard` starts fast without FoundationNetworking; commands that talk to a provider
        // continue in `lanyard-net` (installed in lib/lanyard/), the same CLI with HTTP.
        .executableTarget(name: "lanyard", dependencies: ["LanyardCLI"]),
        .executableTarget(name: "lanyard-net", dependencies: ["LanyardCLI", "LanyardNetwork"]),
        // The library example of docs/library.md, built with the package so it never rots.
        .executableTarget(name: "lanyard-example", dependencies: ["LanyardKit"], path: "Examples/lanyard-example"),
        .executableTarget(
            name: "lanyard-ask-example",
            dependencies: ["LanyardKit"],
            path: "Examples/lanyard-ask-example"
        ),
        // Drives stores from separate processes in tests (concurrency, kill -9). Not installed.
        .executableTarget(name: "lanyard-test-tool", dependencies: ["LanyardStore", "LanyardCore", "LanyardFleet"]),

        .target(
            name: "LanyardTestSupport",
            dependencies: ["LanyardFleet", "LanyardAuth", "LanyardStore", "LanyardCore", "LanyardSupport", "Age"],
            path: "Tests/Support"
        ),
        .testTarget(name: "LanyardSupportTests", dependencies: ["LanyardSupport"]),
        .testTarget(name: "LanyardCoreTests", dependencies: ["LanyardCore", "LanyardSupport"]),
        .testTarget(
            name: "LanyardAuthTests",
            dependencies: [
                "LanyardAuth", "LanyardFleet", "LanyardNetwork", "LanyardStore", "LanyardCore", "LanyardSupport",
                "LanyardTestSupport",
            ]
        ),
        .testTarget(
            name: "LanyardKitTests",
            dependencies: [
                "LanyardKit", "LanyardAuth", "LanyardNetwork", "LanyardStore", "LanyardCore", "LanyardTestSupport",
            ]
        ),
        .testTarget(name: "AgeTests", dependencies: ["Age"], resources: [.copy("Vectors")]),
        .testTarget(
            name: "LanyardStoreTests",
            dependencies: [
                "LanyardStore", "LanyardGLib", "LanyardSystem",
                "LanyardCore", "LanyardSupport", "Age", "LanyardTestSupport",
            ]
        ),
        .testTarget(
            name: "LanyardAgentTests",
            dependencies: [
                "LanyardAgent", "LanyardDesktop", "LanyardAuth", "LanyardFleet", "LanyardIntegrations",
                "LanyardNetwork", "LanyardStore", "LanyardCore", "LanyardSupport", "LanyardTestSupport",
            ]
        ),
        .testTarget(
            name: "LanyardCLITests",
            dependencies: [
                "LanyardCLI", "LanyardDesktop", "Age", "LanyardAuth", "LanyardFleet", "LanyardIntegrations",
                "LanyardSystem",
                "LanyardNetwork", "LanyardStore", "LanyardCore", "LanyardSupport", "LanyardTestSupport",
            ]
        ),
        .testTarget(
            name: "LanyardDesktopTests",
            dependencies: [
                "LanyardDesktop", "LanyardIntegrations", "LanyardAuth", "LanyardStore", "LanyardCore", "LanyardSupport",
                "LanyardTestSupport",
            ]
        ),
        .testTarget(
            name: "LanyardIntegrationsTests",
            dependencies: ["LanyardIntegrations", "LanyardAuth", "LanyardStore", "LanyardCore", "LanyardSupport"]
        ),
        .testTarget(
            name: "LanyardFleetTests",
            dependencies: [
                "LanyardFleet", "Age", "LanyardStore", "LanyardCore", "LanyardSupport", "LanyardTestSupport",
            ]
        ),
        .testTarget(
            name: "LanyardNetworkTests",
            dependencies: ["LanyardNetwork", "LanyardAuth", "LanyardCore", "LanyardSupport", "LanyardTestSupport"]
        ),
        // Checks of the repository as a whole: layering, the public API list, the GLib boundary.
        .testTarget(
            name: "RepositoryChecks",
            dependencies: ["LanyardCore", "LanyardTestSupport"],
            exclude: ["PublicAPI.txt"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Every Swift target imports each module whose members it uses (issue 32): with
// MemberImportVisibility the compiler rejects a member reached only through another file's import.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("MemberImportVisibility")]
}
