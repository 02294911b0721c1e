/// One key of etcd with its value and revisions (the gateway's `mvccpb.KeyValue`).
package struct EtcdKeyValue: Sendable, Equatable {
    package var key: String
    package var value: [UInt8]
    package var createRevision: Int64
    package var modRevision: Int64
    package var version: Int64
    package var lease: Int64

    package init(
        key: String,
        value: [UInt8],
        createRevision: Int64 = 0,
        modRevision: Int64 = 0,
        version: Int64 = 0,
        lease: Int64 = 0
    ) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.version = version
        self.lease = lease
    }
}

/// What a range asks for beyond one key.
package struct EtcdRangeOptions: Sendable, Equatable {
    /// Every key that starts with the key (`range_end` = the key with its last byte incremented).
    package var prefix = false
    /// At most this many keys (0: no limit).
    package var limit: Int64 = 0
    /// Sorted by create revision, oldest first (etcd's mutex and election order).
    package var sortByCreateRevision = false
    /// Newest first (with `sortByCreateRevision`).
    package var descending = false
    /// Only keys created at or before this revision (0: no bound).
    package var maxCreateRevision: Int64 = 0
    /// Keys and revisions without values.
    package var keysOnly = false

    package init(
        prefix: Bool = false,
        limit: Int64 = 0,
        sortByCreateRevision: Bool = false,
        descending: Bool = false,
        maxCreateRevision: Int64 = 0,
        keysOnly: Bool = false
    ) {
        self.prefix = prefix
        self.limit = limit
        self.sortByCreateRevision = sortByCreateRevision
        self.descending = descending
        self.maxCreateRevision = maxCreateRevision
        self.keysOnly = keysOnly
    }
}

/// The answer to a range: the keys and the store's revision when it was read.
package struct EtcdRange: Sendable, Equatable {
    package var kvs: [EtcdKeyValue]
    package var revision: Int64
    package var count: Int64

    package init(kvs: [EtcdKeyValue], revision: Int64, count: Int64) {
        self.kvs = kvs
        self.revision = revision
        self.count = count
    }
}

/// One comparison of a transaction.
package enum EtcdCompare: Sendable, Equatable {
    /// The key's mod revision equals the number (0: the key is absent).
    case modRevision(String, equals: Int64)
    /// The key's create revision equals the number (0: the key is absent).
    case createRevision(String, equals: Int64)
    /// The key's value equals the bytes.
    case value(String, equals: [UInt8])
}

/// One operation of a transaction.
package enum EtcdOperation: Sendable, Equatable {
    case put(String, value: [UInt8], lease: Int64 = 0)
    case range(String, EtcdRangeOptions = EtcdRangeOptions())
    case delete(String, prefix: Bool = false)
}

/// What a transaction's branch answered, one per operation in order (nil for puts and deletes).
package struct EtcdTransactionResult: Sendable, Equatable {
    /// True when every comparison held and the success branch ran (etcd omits `false`).
    package var succeeded: Bool
    package var revision: Int64
    package var ranges: [EtcdRange?]

    package init(succeeded: Bool, revision: Int64, ranges: [EtcdRange?]) {
        self.succeeded = succeeded
        self.revision = revision
        self.ranges = ranges
    }
}

/// A lease: the keys put with it vanish when it is revoked or not kept alive for `ttl` seconds.
package struct EtcdLease: Sendable, Equatable {
    package var id: Int64
    package var ttl: Int64

    package init(id: Int64, ttl: Int64) {
        self.id = id
        self.ttl = ttl
    }
}

/// One change seen by a watch.
package struct EtcdWatchEvent: Sendable, Equatable {
    package enum Kind: Sendable, Equatable { case put, delete }
    package var kind: Kind
    /// The key after the change (for a delete: the key, its mod revision, no value).
    package var kv: EtcdKeyValue
    package var previous: EtcdKeyValue?

    package init(kind: Kind, kv: EtcdKeyValue, previous: EtcdKeyValue? = nil) {
        self.kind = kind
        self.kv = kv
        self.previous = previous
    }
}

/// What one endpoint says of itself (`/v3/maintenance/status`).
public struct EtcdEndpointStatus: Sendable, Equatable {
    public var endpoint: String
    /// The member's id and the leader's id as etcd reports them (hex-free decimal strings).
    public var memberID: String?
    public var leaderID: String?
    public var version: String?
    public var raftTerm: Int64
    /// What went wrong when the endpoint did not answer.
    public var problem: String?

    package init(
        endpoint: String,
        memberID: String? = nil,
        leaderID: String? = nil,
        version: String? = nil,
        raftTerm: Int64 = 0,
        problem: String? = nil
    ) {
        self.endpoint = endpoint
        self.memberID = memberID
        self.leaderID = leaderID
        self.version = version
        self.raftTerm = raftTerm
        self.problem = problem
    }
}

/// A running watch; `cancel()` ends it from any thread (the watch call then returns).
package protocol EtcdWatchHandle: Sendable {
    func cancel()
}

/// etcd's key-value API as Lanyard's fleet uses it: the seam between the fleet's logic and the
/// v3 JSON gateway client (``EtcdGatewayClient``), so pure logic can be tested with a fake.
///
/// Every call is linearizable, bounded by the client's request timeout, and throws ``EtcdError``.
package protocol EtcdKV: Sendable {
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func range(_ key: String, _ options: EtcdRangeOptions) throws -> EtcdRange
    /// - Returns: the revision of the write.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    @discardableResult func put(_ key: String, value: [UInt8], lease: Int64) throws -> Int64
    /// - Returns: how many keys were deleted.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    @discardableResult func delete(_ key: String, prefix: Bool) throws -> Int64
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func transaction(
        compare: [EtcdCompare],
        success: [EtcdOperation],
        failure: [EtcdOperation]
    ) throws -> EtcdTransactionResult
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func grantLease(ttl: Int64) throws -> EtcdLease
    /// One keep-alive. - Returns: the TTL left, 0 when the lease is gone.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func keepAlive(_ lease: Int64) throws -> Int64
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func revoke(_ lease: Int64) throws
    /// Watches every key under `prefix` from `startRevision` (0: from now), calling `onEvents`
    /// with each batch and the revision it was seen at, on the calling thread, until `onEvents`
    /// returns false, `handle` is cancelled, or the stream fails (throws). A compacted start
    /// revision throws ``EtcdError/compacted(revision:)``.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func watch(
        prefix: String,
        startRevision: Int64,
        handle: (any EtcdWatchHandle)?,
        onEvents: ([EtcdWatchEvent], Int64) -> Bool
    ) throws
    /// A handle for ``watch(prefix:startRevision:handle:onEvents:)`` that can cancel it.
    func makeWatchHandle() -> any EtcdWatchHandle
    /// Each endpoint's status, asked one by one (never throws: a failure is the entry's problem).
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func endpointStatus() -> [EtcdEndpointStatus]
}

/// etcd's user management (the auth API), which `fleet remove` uses to take a removed machine's
/// etcd access away when this machine's credentials may (etcd's `root` role).
package protocol EtcdUsers: Sendable {
    /// Deletes user `name`. Throws ``EtcdError/permissionDenied(detail:)`` without the root role;
    /// a user that does not exist is deleted already (no error).
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func deleteUser(_ name: String) throws
    /// Whether user `name` exists. Throws ``EtcdError/permissionDenied(detail:)`` when these
    /// credentials may not ask.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    func userExists(_ name: String) throws -> Bool
}

extension EtcdKV {
    package func range(_ key: String, prefix: Bool = false) throws -> EtcdRange {
        try range(key, EtcdRangeOptions(prefix: prefix))
    }
    package func get(_ key: String) throws -> EtcdKeyValue? { try range(key, EtcdRangeOptions()).kvs.first }
}

/// What went wrong talking to etcd. Descriptions never include values (they may be ciphertext of
/// secrets) and escape any text the server sent.
package enum EtcdError: Error, Equatable, Sendable {
    /// No endpoint answered (each one's failure, in the order tried).
    case unreachable(endpoints: [String], detail: String)
    /// An endpoint answered but the cluster could not serve the request (no leader, no quorum,
    /// a request timed out inside etcd).
    case unavailable(endpoint: String, detail: String)
    /// TLS failed: the CA, the client certificate or its key (names the file when known).
    case tls(endpoint: String, detail: String)
    /// Authentication failed or a permission was denied.
    case permissionDenied(detail: String)
    /// The server's answer could not be read (what and where).
    case malformed(endpoint: String, detail: String)
    /// The watch's start revision was compacted away; restart from a fresh read.
    case compacted(revision: Int64)
    /// The request was cancelled.
    case cancelled
    /// Any other error the server returned (its gRPC code and message).
    case server(endpoint: String, code: Int, message: String)
}
