import Foundation
import LanyardStore
import LanyardTestSupport

/// A private folder for one test, removed when the value is released.
final class TempDirectory: @unchecked Sendable {
    let path: String

    init() {
        let base = (NSTemporaryDirectory() as NSString).standardizingPath
        var template = Array((base + "/lanyard-test.XXXXXX").utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// XDG paths inside this folder.
    var paths: Paths { Paths(environment: environment) }

    var environment: [String: String] {
        [
            "HOME": path + "/home", "XDG_CONFIG_HOME": path + "/config", "XDG_DATA_HOME": path + "/data",
            "XDG_STATE_HOME": path + "/state", "XDG_RUNTIME_DIR": path + "/run",
        ]
    }
}

func fileMode(_ path: String) -> mode_t {
    var st = stat()
    lstat(path, &st)
    return st.st_mode & 0o777
}
