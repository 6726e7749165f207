from crosstalk.cli.entry import main

main()
