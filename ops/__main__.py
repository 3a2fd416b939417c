from ops.cli import main

main()
