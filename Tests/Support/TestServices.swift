import Foundation

#if DEBUG  // Testing is not there in the release build (make release builds every target)
import Testing
#endif

/// What a test does when a service it needs (the private test keyring, the etcd test cluster,
/// the OAuth fixtures' venv, a software TPM, the desktop's tools) is not around.
///
/// Plain `swift test` on a developer's machine: the test is cancelled with a printed reason (it
/// shows as skipped), so the run passes with whatever is installed. Under `make test` and
/// `make check`, which start every service, `LANYARD_TEST_REQUIRE_SERVICES=1` is set and the test
/// fails loudly instead: a service that did not start must never pass as a skip.
package enum TestServices {
    /// Whether this run must have every service (scripts/test.sh and scripts/check.sh set it).
    package static var required: Bool { ProcessInfo.processInfo.environment["LANYARD_TEST_REQUIRE_SERVICES"] == "1" }

    #if DEBUG
    /// Skips the current test (it is cancelled, saying `why` and how to run it), or, when every
    /// service is required, throws `failure`.
    package static func missing(_ why: String, failure: any Error) throws -> Never {
        if required { throw failure }
        try Test.cancel(Comment(rawValue: why + " (skipped; `make test` starts it)"))
    }
    #endif
}
