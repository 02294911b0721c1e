import Glibc
import LanyardCLI

exit(lanyardMain(transportFactory: nil))
