import FoundationEssentials
import LanyardSupport

/// etcd's v3 API over its JSON gateway (`POST /v3/...` on the client port), on libcurl: TLS with
/// a CA file and a client certificate, which URLSession on Linux cannot present.
///
/// Endpoints are tried in order, the last one that answered first. The next endpoint is tried when
/// one cannot be reached (connection or TLS failure) or answers that the cluster cannot serve the
/// request (no leader, a timeout inside etcd). A write is tried again elsewhere only when it cannot
/// have been applied: after a timeout or a dropped connection once it was sent, or etcd's own
/// "request timed out", the call throws ``EtcdError/unavailable(endpoint:detail:)`` instead, since
/// the write may still land (fenced writes make the caller's re-read decide).
///
/// With a user and password the client authenticates at each endpoint it uses (etcd's simple
/// tokens are valid only on the member that issued them) and sends the token as the
/// `Authorization` header, without "Bearer"; when etcd says the token is invalid or stale, it
/// authenticates again once and repeats the request.
///
/// Thread-safe; every call blocks the calling thread. Plain calls reuse a connection per thread
/// and endpoint (see Sources/CCurl), so a call after the first costs no TCP or TLS handshake.
package final class EtcdGatewayClient: EtcdKV, EtcdUsers {
    /// The base URLs, like `https://127.0.0.1:2379` (no scheme means https).
    package let endpoints: [String]
    package let caFile: String?
    package let certFile: String?
    package let keyFile: String?
    package let user: String?
    private let password: String?
    /// Seconds for one request to one endpoint, connection included.
    package let requestTimeout: Double
    /// Seconds for the TCP and TLS set-up with one endpoint.
    package let connectTimeout: Double

    /// The largest answer read (a range of every fleet key stays far below it).
    static let maxAnswerBytes = 64 << 20

    private struct State {
        /// The index of the endpoint that answered last, tried first.
        var preferred = 0
        /// Tokens by endpoint; "" where etcd said authentication is not enabled.
        var tokens: [String: String] = [:]
    }
    private let state = Locked(State())

    /// - Parameters:
    ///   - endpoints: base URLs (`https://host:port`; `http://` only when given so).
    ///   - caFile, certFile, keyFile: PEM files: the CA that signed the servers' certificates (nil:
    ///     the system's), the client certificate and its unencrypted key.
    ///   - user, password: for etcd's authentication, when it is on.
    package init(
        endpoints: [String],
        caFile: String? = nil,
        certFile: String? = nil,
        keyFile: String? = nil,
        user: String? = nil,
        password: String? = nil,
        requestTimeout: Double = 5,
        connectTimeout: Double = 2
    ) {
        self.endpoints = endpoints.map(Self.normalized)
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.user = user
        self.password = password
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
    }

    static func normalized(_ endpoint: String) -> String {
        var text = Substring(endpoint)
        while text.first == " " { text.removeFirst() }
        while text.last == " " || text.last == "/" { text.removeLast() }
        return text.contains("://") ? String(text) : "https://" + text
    }

    // MARK: EtcdKV

    package func range(_ key: String, _ options: EtcdRangeOptions) throws -> EtcdRange {
        try EtcdGatewayMessages.range(
            send("/v3/kv/range", EtcdGatewayMessages.rangeRequest(key, options), write: false)
        )
    }

    @discardableResult
    package func put(_ key: String, value: [UInt8], lease: Int64) throws -> Int64 {
        try send("/v3/kv/put", EtcdGatewayMessages.putRequest(key, value: value, lease: lease), write: true).revision()
    }

    @discardableResult
    package func delete(_ key: String, prefix: Bool) throws -> Int64 {
        try send("/v3/kv/deleterange", EtcdGatewayMessages.deleteRequest(key, prefix: prefix), write: true).int64(
            "deleted"
        )
    }

    package func transaction(
        compare: [EtcdCompare],
        success: [EtcdOperation],
        failure: [EtcdOperation]
    ) throws -> EtcdTransactionResult {
        let writes = (success + failure).contains { if case .range = $0 { return false } else { return true } }
        let body = EtcdGatewayMessages.transactionRequest(compare: compare, success: success, failure: failure)
        return try EtcdGatewayMessages.transaction(send("/v3/kv/txn", body, write: writes))
    }

    package func grantLease(ttl: Int64) throws -> EtcdLease {
        let answer = try send("/v3/lease/grant", .object(["TTL": EtcdGatewayMessages.int64(ttl)]), write: true)
        if let error = try answer.string("error"), !error.isEmpty {
            throw EtcdError.server(endpoint: answer.endpoint, code: 0, message: Self.shown(error))
        }
        let lease = EtcdLease(id: try answer.int64("ID"), ttl: try answer.int64("TTL"))
        guard lease.id != 0 else { throw answer.malformed("has no lease ID") }
        return lease
    }

    package func keepAlive(_ lease: Int64) throws -> Int64 {
        // A stream over the gateway: one request in, one line `{"result":…}` (or `{"error":…}`) out.
        let answer = try send("/v3/lease/keepalive", .object(["ID": EtcdGatewayMessages.int64(lease)]), write: false)
        if let error = answer.fields["error"] { throw Self.streamError(error, endpoint: answer.endpoint) }
        guard let result = try answer.object("result") else { throw answer.malformed("has no result") }
        return try result.int64("TTL")  // left out (zero) when the lease is gone
    }

    /// Revokes the lease, deleting its keys; a lease already gone counts as revoked.
    package func revoke(_ lease: Int64) throws {
        do {
            // Sent again elsewhere when in doubt: revoking twice does no harm.
            _ = try send("/v3/lease/revoke", .object(["ID": EtcdGatewayMessages.int64(lease)]), write: false)
        } catch EtcdError.server(_, let code, _) where code == GRPCCode.notFound {
            return
        }
    }

    package func makeWatchHandle() -> any EtcdWatchHandle { GatewayWatchHandle() }

    // MARK: EtcdUsers

    package func deleteUser(_ name: String) throws {
        do {
            _ = try send("/v3/auth/user/delete", .object(["name": .string(name)]), write: true)
        } catch EtcdError.server(_, let code, let message) where Self.userNotFound(code, message) {
            return
        }
    }

    package func userExists(_ name: String) throws -> Bool {
        do {
            _ = try send("/v3/auth/user/get", .object(["name": .string(name)]), write: false)
            return true
        } catch EtcdError.server(_, let code, let message) where Self.userNotFound(code, message) {
            return false
        }
    }

    /// etcd answers "user name not found" with FailedPrecondition.
    static func userNotFound(_ code: Int, _ message: String) -> Bool {
        code == GRPCCode.failedPrecondition && message.contains("user name not found")
    }

    /// See ``EtcdKV/watch(prefix:startRevision:handle:onEvents:)``. `onEvents` is called only for
    /// batches of events (not for the stream's `created` answer or progress notices), and may call
    /// this client. A `handle` not made by ``makeWatchHandle()`` cannot cancel the watch. Once
    /// events were delivered, a broken stream throws rather than moving to another endpoint: the
    /// caller resumes from the last revision it saw plus one.
    package func watch(
        prefix: String,
        startRevision: Int64,
        handle: (any EtcdWatchHandle)?,
        onEvents: ([EtcdWatchEvent], Int64) -> Bool
    ) throws {
        try withoutActuallyEscaping(onEvents) { onEvents throws(EtcdError) in
            try watch(
                prefix: prefix,
                startRevision: startRevision,
                cancel: (handle as? GatewayWatchHandle)?.token ?? CurlCancelToken(),
                onEvents: onEvents
            )
        }
    }

    private func watch(
        prefix: String,
        startRevision: Int64,
        cancel: CurlCancelToken,
        onEvents: @escaping ([EtcdWatchEvent], Int64) -> Bool
    ) throws(EtcdError) {
        let body = EtcdGatewayMessages.bytes(
            EtcdGatewayMessages.watchRequest(prefix: prefix, startRevision: startRevision)
        )
        var failures: [Failure] = []
        for index in order() {
            let endpoint = endpoints[index]
            var renewedToken = false
            while true {
                if cancel.isFired { return }
                // Also ends the watch when this member loses its leader, rather than let it go quiet.
                var headers = [Self.requireLeader]
                switch try authorization(endpoint) {
                case .next(let failure): failures.append(failure)
                case .header(let header):
                    headers += header
                    var stream = WatchStream(endpoint: endpoint, onEvents: onEvents)
                    let result = CurlTransfer.post(
                        request(endpoint, "/v3/watch", body, headers, timeout: 0),
                        cancel: cancel
                    ) {
                        stream.feed($0)
                    }
                    switch try finishWatch(result, &stream, endpoint: endpoint, renewedToken: renewedToken) {
                    case .done:
                        remember(index)
                        return
                    case .renewToken:
                        forgetToken(endpoint)
                        renewedToken = true
                        continue
                    case .next(let failure): failures.append(failure)
                    }
                }
                break
            }
        }
        throw Self.exhausted(failures)
    }

    package func endpointStatus() -> [EtcdEndpointStatus] {
        endpoints.map { endpoint in
            do {
                // Without requiring a leader: a member without one still says so in `errors`.
                switch try attempt(
                    endpoint,
                    "/v3/maintenance/status",
                    EtcdGatewayMessages.bytes(.object([:])),
                    write: false,
                    requireLeader: false
                ) {
                case .next(let failure):
                    return EtcdEndpointStatus(endpoint: endpoint, problem: failure.detail)
                case .answer(let answer):
                    let header = try answer.object("header")
                    let errors = try answer.array("errors").compactMap { $0.string.map(Self.shown) }
                    let leader = try answer.string("leader")
                    return EtcdEndpointStatus(
                        endpoint: endpoint,
                        memberID: try header?.string("member_id"),
                        leaderID: leader == "0" ? nil : leader,
                        version: try answer.string("version"),
                        raftTerm: try answer.int64("raftTerm"),
                        problem: errors.isEmpty ? nil : errors.joined(separator: "; ")
                    )
                }
            } catch {
                return EtcdEndpointStatus(
                    endpoint: endpoint,
                    problem: (error as? EtcdError)?.errorDescription ?? "\(error)"
                )
            }
        }
    }

    // MARK: Sending

    /// Why an endpoint was left for the next one.
    struct Failure {
        enum Kind { case connect, tls, unavailable }
        var endpoint: String
        var kind: Kind
        var detail: String
    }

    private enum Attempt {
        case answer(EtcdGatewayMessages.Answer)
        case next(Failure)
    }

    /// Sends one request to the endpoints in turn until one answers it.
    private func send(_ path: String, _ body: JSONValue, write: Bool) throws(EtcdError) -> EtcdGatewayMessages.Answer {
        let bytes = EtcdGatewayMessages.bytes(body)
        var failures: [Failure] = []
        for index in order() {
            switch try attempt(endpoints[index], path, bytes, write: write) {
            case .answer(let answer):
                remember(index)
                return answer
            case .next(let failure):
                failures.append(failure)
            }
        }
        throw Self.exhausted(failures)
    }

    /// The endpoints' indexes, the one that answered last first.
    private func order() -> [Int] {
        let preferred = state.withLock { $0.preferred }
        guard endpoints.indices.contains(preferred) else { return Array(endpoints.indices) }
        return [preferred] + endpoints.indices.filter { $0 != preferred }
    }

    private func remember(_ index: Int) { state.withLock { $0.preferred = index } }
    private func forgetToken(_ endpoint: String) { _ = state.withLock { $0.tokens.removeValue(forKey: endpoint) } }

    /// One endpoint: authenticates when needed, sends, and sorts a server error into "try the
    /// next endpoint", "authenticate again" or a thrown error.
    private func attempt(
        _ endpoint: String,
        _ path: String,
        _ bytes: [UInt8],
        write: Bool,
        requireLeader: Bool = true
    ) throws(EtcdError) -> Attempt {
        var renewedToken = false
        while true {
            var headers = requireLeader ? [Self.requireLeader] : []
            switch try authorization(endpoint) {
            case .next(let failure): return .next(failure)
            case .header(let header): headers += header
            }
            switch try exchange(endpoint, path, bytes, headers, write: write) {
            case .answer(let answer): return .answer(answer)
            case .next(let failure): return .next(failure)
            case .serverError(let error):
                switch error.kind {
                case .invalidToken where user != nil && !renewedToken:
                    forgetToken(endpoint)
                    renewedToken = true
                case .unavailable(let beforeApplying):
                    if write && !beforeApplying {
                        throw EtcdError.unavailable(
                            endpoint: endpoint,
                            detail: "\(error.message) (the write may have been applied)"
                        )
                    }
                    return .next(Failure(endpoint: endpoint, kind: .unavailable, detail: error.message))
                default:
                    throw error.thrown(endpoint: endpoint, authenticated: user != nil)
                }
            }
        }
    }

    private enum Authorization {
        case header([String])
        case next(Failure)
    }

    /// The Authorization header for `endpoint`, authenticating there first when there is no token yet.
    private func authorization(_ endpoint: String) throws(EtcdError) -> Authorization {
        guard let user else { return .header([]) }
        if let token = state.withLock({ $0.tokens[endpoint] }) {
            return .header(token.isEmpty ? [] : ["Authorization: \(token)"])
        }
        let body = EtcdGatewayMessages.bytes(.object(["name": .string(user), "password": .string(password ?? "")]))
        switch try exchange(endpoint, "/v3/auth/authenticate", body, [Self.requireLeader], write: false) {
        case .next(let failure):
            return .next(failure)
        case .serverError(let error):
            if case .authNotEnabled = error.kind {
                state.withLock { $0.tokens[endpoint] = "" }
                return .header([])
            }
            if case .unavailable = error.kind {
                return .next(Failure(endpoint: endpoint, kind: .unavailable, detail: error.message))
            }
            if case .permission = error.kind {
                throw EtcdError.permissionDenied(
                    detail: "\(endpoint) refused the name or password of user \(Self.shown(user)): \(error.message)"
                )
            }
            throw error.thrown(endpoint: endpoint, authenticated: true)
        case .answer(let answer):
            guard let token = try answer.string("token"), TokenText.problem(token) == nil else {
                throw answer.malformed("has no usable token")
            }
            state.withLock { $0.tokens[endpoint] = token }
            return .header(["Authorization: \(token)"])
        }
    }

    /// gRPC metadata through the gateway (`Grpc-Metadata-` headers): a member without a leader
    /// answers "no leader" at once, before proposing anything, instead of waiting about 7 s for
    /// "request timed out" (reads) or "context deadline exceeded" (writes, whose fate is then
    /// unknown). So a leaderless member is passed over quickly and safely, writes included.
    static let requireLeader = "Grpc-Metadata-hasleader: true"

    private enum Exchange {
        case answer(EtcdGatewayMessages.Answer)
        case next(Failure)
        case serverError(ServerError)
    }

    private func request(
        _ endpoint: String,
        _ path: String,
        _ body: [UInt8],
        _ headers: [String],
        timeout: Double
    ) -> CurlRequest {
        CurlRequest(
            url: endpoint + path,
            body: body,
            caFile: caFile,
            certFile: certFile,
            keyFile: keyFile,
            headers: headers,
            timeout: timeout,
            connectTimeout: connectTimeout
        )
    }

    /// One POST to one endpoint, its transport failures sorted.
    private func exchange(
        _ endpoint: String,
        _ path: String,
        _ bytes: [UInt8],
        _ headers: [String],
        write: Bool
    ) throws(EtcdError) -> Exchange {
        var body: [UInt8] = []
        let result = CurlTransfer.post(request(endpoint, path, bytes, headers, timeout: requestTimeout)) { chunk in
            guard body.count + chunk.count <= Self.maxAnswerBytes else { return false }
            body.append(contentsOf: chunk)
            return true
        }
        switch result {
        case .answered(let status):
            if status == 200 {
                return .answer(
                    try EtcdGatewayMessages.Answer(parsing: body, endpoint: endpoint, what: "answer to \(path)")
                )
            }
            return .serverError(ServerError(status: status, body: body))
        case .connectFailed(let text):
            return .next(Failure(endpoint: endpoint, kind: .connect, detail: "cannot connect (\(Self.shown(text)))"))
        case .tlsFailed(let code, let text):
            return .next(Failure(endpoint: endpoint, kind: .tls, detail: tlsDetail(code: code, Self.shown(text))))
        case .timedOut:
            let detail = "no answer within \(Self.seconds(requestTimeout))"
            if write {
                throw EtcdError.unavailable(endpoint: endpoint, detail: "\(detail) (the write may have been applied)")
            }
            return .next(Failure(endpoint: endpoint, kind: .connect, detail: detail))
        case .failed(let text, let requestSent):
            if write && requestSent {
                throw EtcdError.unavailable(
                    endpoint: endpoint,
                    detail: "the connection failed after the request was sent (\(Self.shown(text))); "
                        + "the write may have been applied"
                )
            }
            return .next(
                Failure(endpoint: endpoint, kind: .connect, detail: "the connection failed (\(Self.shown(text)))")
            )
        case .cancelled:
            throw EtcdError.cancelled
        case .stopped:
            throw EtcdError.malformed(
                endpoint: endpoint,
                detail: "the answer to \(path) is larger than \(Self.maxAnswerBytes >> 20) MiB"
            )
        case .unavailable(let text):
            throw EtcdError.unreachable(endpoints: endpoints, detail: Self.shown(text))
        }
    }

    /// What a TLS failure means, naming the file involved.
    private func tlsDetail(code: Int, _ text: String) -> String {
        let trustAnchors = caFile.map { "the CA in \($0)" } ?? "the system's trust anchors"
        switch code {
        case 60: return "the server's certificate does not verify against \(trustAnchors) (\(text))"
        case 77: return "cannot read the CA file \(caFile ?? "") (\(text))"
        case 58:
            return "cannot use the client certificate \(certFile ?? "(none)") "
                + "with the key \(keyFile ?? "(none)") (\(text))"
        default:
            guard text.contains("alert") else { return "the TLS handshake failed (\(text))" }
            guard let certFile else {
                return "the server requires a client certificate and none is configured (\(text))"
            }
            return "the server refused the client certificate \(certFile) (\(text))"
        }
    }

    /// The error for a request no endpoint served.
    static func exhausted(_ failures: [Failure]) -> EtcdError {
        guard let first = failures.first else {
            return .unreachable(endpoints: [], detail: "no etcd endpoint is configured")
        }
        let each = failures.map { "\($0.endpoint): \($0.detail)" }.joined(separator: "; ")
        if let unavailable = failures.first(where: { $0.kind == .unavailable }) {
            return .unavailable(endpoint: unavailable.endpoint, detail: failures.count == 1 ? unavailable.detail : each)
        }
        // A TLS failure is a configuration to fix: report it even when other endpoints were down.
        if let tls = failures.first(where: { $0.kind == .tls }) {
            let others = failures.filter { $0.endpoint != tls.endpoint }.map { "\($0.endpoint): \($0.detail)" }
            return .tls(
                endpoint: tls.endpoint,
                detail: others.isEmpty ? tls.detail : "\(tls.detail); also \(others.joined(separator: "; "))"
            )
        }
        return .unreachable(endpoints: failures.map(\.endpoint), detail: failures.count == 1 ? first.detail : each)
    }

    // MARK: Server errors

    /// gRPC status codes etcd answers with.
    enum GRPCCode {
        static let invalidArgument = 3, deadlineExceeded = 4, notFound = 5, permissionDenied = 7
        static let failedPrecondition = 9, unavailable = 14, unauthenticated = 16
    }

    /// An error answer: `{"error","code","message"}` for a call, `{"error":{"grpc_code","message"}}`
    /// in a stream.
    struct ServerError {
        enum Kind: Equatable {
            /// The cluster could not serve it; `beforeApplying` when a write cannot have been applied.
            case unavailable(beforeApplying: Bool)
            case invalidToken, authNotEnabled, permission, other
        }
        var code: Int
        /// Escaped for a terminal, shortened.
        var message: String
        var kind: Kind

        init(code: Int, message: String) {
            self.code = code
            self.message = EtcdGatewayClient.shown(message)
            self.kind = Self.kind(code: code, message: message)
        }

        init(status: Int, body: [UInt8]) {
            if case .object(let fields)? = try? JSONValue.parse(Data(body)) {
                self.init(fields)
            } else {
                // Not etcd's gateway speaking (a proxy?): the HTTP status is all there is.
                self.init(code: status == 503 ? GRPCCode.unavailable : 0, message: "HTTP status \(status)")
            }
        }

        init(_ fields: [String: JSONValue]) {
            if case .object(let inner)? = fields["error"] {
                self.init(code: Int(inner["grpc_code"]?.number ?? 0), message: inner["message"]?.string ?? "no message")
            } else {
                self.init(
                    code: Int(fields["code"]?.number ?? 0),
                    message: fields["message"]?.string ?? fields["error"]?.string ?? "no message"
                )
            }
        }

        static func kind(code: Int, message: String) -> Kind {
            let text = message.lowercased()
            if text.contains("invalid auth token") || text.contains("revision of auth store is old") {
                return .invalidToken
            }
            if text.contains("authentication is not enabled") { return .authNotEnabled }
            if code == GRPCCode.permissionDenied || code == GRPCCode.unauthenticated
                || text.contains("permission denied")
                || text.contains("authentication failed") || text.contains("user name is empty")
            {
                return .permission
            }
            // etcd refuses these before proposing anything to raft.
            if text.contains("no leader") || text.contains("not capable") { return .unavailable(beforeApplying: true) }
            if code == GRPCCode.unavailable || code == GRPCCode.deadlineExceeded || text.contains("request timed out")
                || text.contains("deadline exceeded")
            {
                return .unavailable(beforeApplying: false)
            }
            return .other
        }

        func thrown(endpoint: String, authenticated: Bool) -> EtcdError {
            switch kind {
            case .unavailable: return .unavailable(endpoint: endpoint, detail: message)
            case .permission, .invalidToken:
                let hint = authenticated ? "" : " (etcd has authentication on: configure a user and password)"
                return .permissionDenied(detail: "\(endpoint): \(message)\(hint)")
            case .authNotEnabled, .other: return .server(endpoint: endpoint, code: code, message: message)
            }
        }
    }

    static func streamError(_ error: JSONValue, endpoint: String) -> EtcdError {
        ServerError(["error": error]).thrown(endpoint: endpoint, authenticated: true)
    }

    /// Server or curl text made safe to show, at most 300 characters.
    static func shown(_ text: String) -> String {
        let short = text.count > 300 ? String(text.prefix(300)) + "…" : text
        return TerminalText.escaped(short)
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\((value * 10).rounded() / 10) s"
    }

    // MARK: Watching

    private enum WatchEnd {
        case done
        case renewToken
        case next(Failure)
    }

    /// What a watch transfer's end means: returned, thrown, or another endpoint or token to try.
    private func finishWatch(
        _ result: CurlResult,
        _ stream: inout WatchStream,
        endpoint: String,
        renewedToken: Bool
    ) throws(EtcdError) -> WatchEnd {
        switch result {
        case .cancelled:
            return .done
        case .stopped, .answered:
            stream.finish()
            if case .answered(let status) = result, status != 200, stream.problem == nil {
                stream.problem = .server(ServerError(status: status, body: []))
            }
            switch stream.problem {
            case nil:
                if case .stopped = result { return .done }  // onEvents returned false
                throw EtcdError.unavailable(endpoint: endpoint, detail: "the watch stream ended")
            case .error(let error)?:
                throw error
            case .server(let error)?:
                if error.kind == .invalidToken, user != nil, !renewedToken, !stream.delivered { return .renewToken }
                if case .unavailable = error.kind, !stream.delivered {
                    return .next(Failure(endpoint: endpoint, kind: .unavailable, detail: error.message))
                }
                throw error.thrown(endpoint: endpoint, authenticated: user != nil)
            }
        case .connectFailed(let text), .failed(let text, _), .timedOut(let text):
            guard !stream.delivered else {
                throw EtcdError.unavailable(endpoint: endpoint, detail: "the watch stream broke (\(Self.shown(text)))")
            }
            return .next(Failure(endpoint: endpoint, kind: .connect, detail: "cannot watch (\(Self.shown(text)))"))
        case .tlsFailed(let code, let text):
            return .next(Failure(endpoint: endpoint, kind: .tls, detail: tlsDetail(code: code, Self.shown(text))))
        case .unavailable(let text):
            throw EtcdError.unreachable(endpoints: endpoints, detail: Self.shown(text))
        }
    }
}

/// A watch handle of ``EtcdGatewayClient``: cancelling wakes the watch's transfer at once.
final class GatewayWatchHandle: EtcdWatchHandle {
    let token = CurlCancelToken()
    func cancel() { token.fire() }
}

/// Reads a watch's answer: one JSON object per line, `{"result":…}` or `{"error":…}`.
struct WatchStream {
    enum Problem {
        case error(EtcdError)
        case server(EtcdGatewayClient.ServerError)
    }

    let endpoint: String
    let onEvents: ([EtcdWatchEvent], Int64) -> Bool
    private var buffer: [UInt8] = []
    /// Whether a batch of events reached `onEvents`.
    private(set) var delivered = false
    var problem: Problem?

    init(endpoint: String, onEvents: @escaping ([EtcdWatchEvent], Int64) -> Bool) {
        self.endpoint = endpoint
        self.onEvents = onEvents
    }

    /// Takes a chunk; false to stop the transfer (a problem, or `onEvents` said so).
    mutating func feed(_ chunk: UnsafeRawBufferPointer) -> Bool {
        buffer.append(contentsOf: chunk)
        var start = 0
        defer { buffer.removeFirst(start) }
        while let newline = buffer[start...].firstIndex(of: 0x0A) {
            let line = Array(buffer[start..<newline])
            start = newline + 1
            guard handle(line) else { return false }
        }
        guard buffer.count - start <= EtcdGatewayClient.maxAnswerBytes else {
            problem = .error(
                .malformed(
                    endpoint: endpoint,
                    detail: "a watch answer is longer than \(EtcdGatewayClient.maxAnswerBytes >> 20) MiB"
                )
            )
            return false
        }
        return true
    }

    /// The last line, when the stream ended without a newline after it.
    mutating func finish() {
        guard problem == nil, !buffer.isEmpty else { return }
        let line = buffer
        buffer = []
        _ = handle(line)
    }

    private mutating func handle(_ line: [UInt8]) -> Bool {
        guard line.contains(where: { $0 != 0x20 && $0 != 0x0D && $0 != 0x09 }) else { return true }
        do {
            let answer = try EtcdGatewayMessages.Answer(parsing: line, endpoint: endpoint, what: "watch answer")
            if answer.fields["error"] != nil {
                problem = .server(EtcdGatewayClient.ServerError(answer.fields))
                return false
            }
            guard let result = try answer.object("result") else { throw answer.malformed("has no result") }
            if try result.bool("canceled") {
                let compacted = try result.int64("compact_revision")
                if compacted > 0 {
                    problem = .error(.compacted(revision: compacted))
                } else {
                    let reason = try result.string("cancel_reason") ?? "the watch was cancelled by etcd"
                    problem = .server(EtcdGatewayClient.ServerError(code: 0, message: reason))
                }
                return false
            }
            let events = try EtcdGatewayMessages.watchEvents(result)
            guard !events.isEmpty else { return true }  // created, or a progress notice
            delivered = true
            return onEvents(events, try result.revision())
        } catch let error as EtcdError {
            problem = .error(error)
            return false
        } catch {
            problem = .error(.malformed(endpoint: endpoint, detail: "\(error)"))
            return false
        }
    }
}
