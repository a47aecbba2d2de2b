from croupier.cli import main

main()
