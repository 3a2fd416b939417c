from metalake.cli import main

main()
