// libFuzzer harness for what servers answer: OIDC discovery documents, device authorization
// answers (ChatGPT's and RFC 8628's), browser sign-in callbacks (the request and a pasted
// redirect address), token endpoint bodies, usage reports and
// `usage_limit_reached` bodies, and the claims of the tokens they hand out. Built by scripts/fuzz.sh
// against LanyardAuth (built for testing: its answer parsers are internal) and the modules below it.
// Beyond "does not crash": every endpoint a discovery document gives is https or loopback http;
// every usage percentage accepted is from 0 to 100; every date Lanyard would store or show from an answer (a token's
// expiry, a usage window's reset) is written as RFC 3339 text that parses back to the same text,
// and every number it would show fits an Int; a user code Lanyard would print has no control
// character; a token that is accepted is visible ASCII; account names, plans and error codes that
// are accepted hold nothing a terminal would act on; JSON output of any text escapes all of it and
// reads back unchanged.

import Foundation
import LanyardCore
import LanyardSupport

@testable import LanyardAuth

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponses(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: data, count: size))
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func storable(_ date: Date?) {
        guard let date else { return }
        let text = RFC3339.string(from: date)
        guard let back = RFC3339.date(from: text), RFC3339.string(from: back) == text else {
            fatalError("date \(text) does not parse back")
        }
        _ = date.timeIntervalSince(now).rounded().saturatingInt
    }

    let json = try? JSONValue.parse(bytes)
    if let endpoints = try? DiscoveryAnswer.endpoints(json, step: "fuzz") {
        for url in [endpoints.deviceAuthorization, endpoints.token, endpoints.revocation].compactMap({ $0 })
        where !Loopback.isSecureOrLocal(url) {
            fatalError("a discovered endpoint that is neither https nor http to this machine: \(url)")
        }
    }
    let shownAt = URL(string: "https://auth.example.com/codex/device")!
    for authorization in [
        try? DeviceAuthorizationAnswer.chatGPT(json, step: "fuzz", verificationURL: shownAt, expiresAt: now + 900),
        try? DeviceAuthorizationAnswer.rfc8628(json, step: "fuzz", now: now),
    ].compactMap({ $0 }) {
        if authorization.userCode.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }
        ) {
            fatalError("a user code with a control character: \(authorization.userCode.debugDescription)")
        }
        guard authorization.interval.isFinite, authorization.interval >= 0 else {
            fatalError("interval \(authorization.interval)")
        }
        storable(authorization.expiresAt)
        _ = (authorization.interval * 1e9).rounded().saturatingInt
    }
    func noTerminalControls(_ text: String?, _ what: String) {
        if let text, text.unicodeScalars.contains(where: { TerminalText.isUnsafe($0) }) {
            fatalError("\(what) accepted with a terminal control: \(text.debugDescription)")
        }
    }
    if let tokens = try? TokenResponse.parse(bytes, step: "fuzz") {
        storable(tokens.expiresAt(now: now))
        for token in [tokens.accessToken, tokens.refreshToken, tokens.idToken].compactMap({ $0 })
        where TokenText.problem(token) != nil {
            fatalError("a token that is not visible ASCII was accepted")
        }

    }
    noTerminalControls(ServerErrorDetail(body: bytes).code, "an error code")
    if let report = try? UsageParser.report(bytes, now: now) {
        noTerminalControls(report.plan?.rawValue, "a usage plan")
        noTerminalControls(report.credits?.balance, "a credits balance")
        for extra in report.additionalLimits {
            noTerminalControls(extra.name, "a limit name")
            noTerminalControls(extra.feature, "a metered feature")
        }
        for window in report.windows + report.additionalLimits.flatMap(\.windows) {
            guard (0...100).contains(window.usedPercent) else {
                fatalError("a usage percentage of \(window.usedPercent)")
            }
            _ = window.usedPercent.rounded().saturatingInt
            _ = window.length?.name  // every length has a name, however long
            storable(window.resetsAt)
        }
        _ = report.highestUsedPercent.rounded().saturatingInt
        storable(report.limitResetsAt)
    }
    let text = String(decoding: bytes, as: UTF8.self)
    // A request to the browser sign-in's listener, and a pasted redirect address: whatever their
    // query says, the error it ends a sign-in with holds nothing a terminal would act on.
    for query in [CallbackRequest(head: Array(bytes))?.query, BrowserSignInFlow.pastedQuery(text)].compactMap({ $0 }) {
        if case .failed(let error) = BrowserSignInFlow.verdict(query, state: query["state"] ?? "") {
            noTerminalControls(error.errorDescription, "a sign-in callback's error")
        }
    }
    let headers = [
        "x-codex-primary-used-percent": text, "x-codex-primary-window-minutes": text,
        "x-codex-primary-reset-after-seconds": text,
    ]
    if let limit = UsageParser.limit(status: 429, body: bytes, headers: headers, now: now) {
        storable(limit.resetsAt)
        _ = ClientError.usageLimitReached(limit).errorDescription
        if let window = limit.rateLimit?.primary {
            storable(window.resetsAt)
            _ = window.length?.name
            guard (0...100).contains(window.usedPercent) else {
                fatalError("a usage percentage of \(window.usedPercent) in a header")
            }
        }
    }
    // The input as a token's payload: its dates and the account in an id_token's claims.
    if let claims = try? JWTClaims(token: "e30." + Base64URL.encode(bytes) + ".c2ln") {
        storable(claims.expiresAt)
        storable(claims.issuedAt)
        if let info = try? AccountInfo(openAIClaims: claims).checkedOutsideText(place: "fuzz") {
            for field in [info.email, info.userID, info.accountID, info.plan?.rawValue] {
                noTerminalControls(field, "a claim")
            }
        }
    }
    // Any text as JSON: nothing a terminal acts on is written raw, and it reads back the same.
    let serialized = JSONValue.string(text).serialized()
    noTerminalControls(serialized, "JSON output")
    guard (try? JSONValue.parse(Data(serialized.utf8))) == .string(text) else {
        fatalError("JSON text does not read back")
    }
    return 0
}
