import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

extension Error {
    /// The sentence shown to a person for this error.
    ///
    /// Lanyard's own errors are `LocalizedError`s and give their `errorDescription`. The command-line
    /// binary links FoundationEssentials only (full Foundation and its ICU data cost about a
    /// millisecond at every start, see docs/performance.md), where `localizedDescription` does not
    /// exist and file-system errors (`CocoaError`) carry no text; those are described here as
    /// "PATH: strerror", the way the C library's tools say it.
    package var userFacingDescription: String {
        if let described = (self as? LocalizedError)?.errorDescription { return described }
        if let cocoa = self as? CocoaError {
            let path = cocoa.userInfo["NSFilePath"] as? String ?? (cocoa.userInfo["NSURL"] as? URL)?.path
            let reason: String
            if let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
                reason = systemMessage(posix.code.rawValue)
            } else {
                reason = "file operation failed (code \(cocoa.code.rawValue))"
            }
            return path.map { "\(TerminalText.escaped($0)): \(reason)" } ?? reason
        }
        if let posix = self as? POSIXError { return systemMessage(posix.code.rawValue) }
        return String(describing: self)
    }
}

/// The C library's text for an errno value (LanyardSystem's `SystemCallError` gives the same for
/// the modules above it).
package func systemMessage(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "system error \(code)" }
    return String(cString: text)
}
