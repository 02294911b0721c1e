import Foundation
import LanyardCLI

exit(lanyardMain(transportFactory: nil))
