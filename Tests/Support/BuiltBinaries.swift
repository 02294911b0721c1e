import Foundation

/// The folder of the package's debug build, the one place tests name it. Thread Sanitizer runs
/// (a build under .build/tsan) still start these uninstrumented binaries and read these modules.
package let buildFolder: URL = repositoryRoot.appendingPathComponent(".build/debug")

/// A binary this package builds (`lanyard`, `lanyard-net`, `lanyard-test-tool`, the examples), for
/// tests that run real separate processes. `LANYARD_BIN` overrides `lanyard` (to test a release build).
package func builtBinary(_ name: String) -> String {
    if name == "lanyard", let bin = ProcessInfo.processInfo.environment["LANYARD_BIN"], !bin.isEmpty { return bin }
    return buildFolder.appendingPathComponent(name).path
}
