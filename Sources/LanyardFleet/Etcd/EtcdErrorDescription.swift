import FoundationEssentials
import LanyardCore
import LanyardSupport

extension EtcdError: LanyardError {
    package var code: ErrorCode {
        switch self {
        case .unreachable: return .etcdUnreachable
        case .unavailable: return .etcdUnavailable
        case .tls: return .etcdTLS
        case .permissionDenied: return .etcdPermissionDenied
        case .malformed: return .etcdMalformedAnswer
        case .compacted: return .etcdCompacted
        case .cancelled: return .etcdCancelled
        case .server: return .etcdError
        }
    }

    /// What went wrong and where; the details were escaped where they came in, and no value is
    /// ever part of them.
    package var errorDescription: String? {
        switch self {
        case .unreachable(let endpoints, let detail):
            switch endpoints.count {
            case 0: return "etcd is unreachable: \(detail)"
            case 1: return "etcd is unreachable at \(endpoints[0]): \(detail)"
            default: return "no etcd endpoint answered: \(detail)"
            }
        case .unavailable(let endpoint, let detail): return "etcd at \(endpoint) could not serve the request: \(detail)"
        case .tls(let endpoint, let detail): return "TLS with etcd at \(endpoint) failed: \(detail)"
        case .permissionDenied(let detail): return "etcd refused the request: \(detail)"
        case .malformed(let endpoint, let detail):
            return "etcd at \(endpoint) sent an answer Lanyard cannot read: \(detail)"
        case .compacted(let revision):
            return "the watch started at a revision etcd has compacted "
                + "(the oldest kept is \(revision)); read again and watch from there"
        case .cancelled: return "the etcd request was cancelled"
        case .server(let endpoint, let code, let message):
            return "etcd at \(endpoint) answered with error \(code): \(message)"
        }
    }
}
