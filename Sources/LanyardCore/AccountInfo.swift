import Foundation

/// Who a slot is signed in as. Not secret: derived from id-token claims and kept in the registry so
/// `list` and `status` run without unlocking anything.
public struct AccountInfo: Codable, Hashable, Sendable {
    public var email: String?
    public var userID: String?
    public var accountID: String?
    public var plan: Plan?
    public var isFedRAMPAccount: Bool

    public init(email: String? = nil, userID: String? = nil, accountID: String? = nil, plan: Plan? = nil,
                isFedRAMPAccount: Bool = false) {
        self.email = email
        self.userID = userID
        self.accountID = accountID
        self.plan = plan
        self.isFedRAMPAccount = isFedRAMPAccount
    }

    enum CodingKeys: String, CodingKey {
        case email, userID = "user_id", accountID = "account_id", plan, isFedRAMPAccount = "fedramp"
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        userID = try c.decodeIfPresent(String.self, forKey: .userID)
        accountID = try c.decodeIfPresent(String.self, forKey: .accountID)
        plan = try c.decodeIfPresent(Plan.self, forKey: .plan)
        isFedRAMPAccount = try c.decodeIfPresent(Bool.self, forKey: .isFedRAMPAccount) ?? false
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(email, forKey: .email)
        try c.encodeIfPresent(userID, forKey: .userID)
        try c.encodeIfPresent(accountID, forKey: .accountID)
        try c.encodeIfPresent(plan, forKey: .plan)
        try c.encode(isFedRAMPAccount, forKey: .isFedRAMPAccount)
    }
}
