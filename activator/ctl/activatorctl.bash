# bash completion for activatorctl
_activatorctl()
{
    local cur prev words cword
    _init_completion || return

    local commands="status wake park freeze thaw swap stage promote releases gc claim claims boxes hold unhold unpin move drain undrain checkpoint checkpoints watch stats version reload help"
    local global_opts="--connect --events --json --timeout --tls-cert --tls-key --tls-ca --store --store-ca --store-cert --store-key --no-color --help"

    case $prev in
        --connect | --events | --store)
            return ;;
        --tls-cert | --tls-key | --tls-ca | --store-ca | --store-cert | --store-key)
            _filedir
            return ;;
        --timeout)
            return ;;
        --mode)
            COMPREPLY=($(compgen -W "overlap stop-first" -- "$cur"))
            return ;;
    esac

    # Find the command word, skipping global options and their values.
    local i command= connect=() store=() nargs=0
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --connect | --events)
                connect+=("${words[i]}" "${words[i + 1]}")
                ((i++)) ;;
            --store | --store-ca | --store-cert | --store-key)
                store+=("${words[i]}" "${words[i + 1]}")
                ((i++)) ;;
            --timeout | --tls-cert | --tls-key | --tls-ca)
                ((i++)) ;;
            -*) ;;
            *)
                if [[ -z $command ]]; then
                    command=${words[i]}
                else
                    ((nargs++))
                fi ;;
        esac
    done

    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$global_opts" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi

    local opts="--help"
    case $command in
        status) opts+=" --names" ;;
        wake) opts+=" --no-wait" ;;
        swap) opts+=" --mode --no-wait" ;;
        stage) opts+=" --promote" ;;
        claim) opts+=" --force --revision --wait" ;;
        move) opts+=" --timeout --force --abort" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi

    # The hosts: a daemon's, or with --store the store's claims.
    _activatorctl_hosts()
    {
        if ((${#store[@]})); then
            activatorctl "${store[@]}" --timeout 2 --no-color claims 2>/dev/null |
                awk 'NR > 1 { print $1 }'
        else
            activatorctl "${connect[@]}" --timeout 2 status --names 2>/dev/null
        fi
    }

    # The boxes the fleet's store knows, live or dead.
    _activatorctl_boxes()
    {
        activatorctl "${store[@]}" "${connect[@]}" --timeout 2 --no-color boxes 2>/dev/null |
            awk 'NR > 1 { print $1 }'
    }

    case $command in
        help)
            ((nargs == 0)) && COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
        claim)
            if ((nargs == 0)); then
                COMPREPLY=($(compgen -W "show wait assign release export import" -- "$cur"))
            elif ((nargs == 1)) && [[ ${words[cword - 1]} == import ]]; then
                COMPREPLY=($(compgen -f -- "$cur"))
            elif ((nargs == 1)) && [[ ${words[cword - 1]} != export ]]; then
                COMPREPLY=($(compgen -W "$(_activatorctl_hosts)" -- "$cur"))
            fi ;;
        status | wake | park | freeze | thaw | releases | watch | swap | promote | hold | unhold | unpin | gc | checkpoint | checkpoints)
            ((nargs == 0)) && COMPREPLY=($(compgen -W "$(_activatorctl_hosts)" -- "$cur")) ;;
        move)
            if ((nargs == 0)); then
                COMPREPLY=($(compgen -W "$(_activatorctl_hosts)" -- "$cur"))
            elif ((nargs == 1)); then
                COMPREPLY=($(compgen -W "$(_activatorctl_boxes)" -- "$cur"))
            fi ;;
        drain | undrain)
            ((nargs == 0)) && COMPREPLY=($(compgen -W "$(_activatorctl_boxes)" -- "$cur")) ;;
        claims)
            COMPREPLY=($(compgen -W "$(_activatorctl_hosts)" -- "$cur")) ;;
        stage)
            if ((nargs == 0)); then
                COMPREPLY=($(compgen -W "$(_activatorctl_hosts)" -- "$cur"))
            elif ((nargs == 2)); then
                _filedir
            fi ;;
    esac
} &&
    complete -F _activatorctl activatorctl
